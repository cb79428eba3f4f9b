"""The GPU check table printer (table.py)."""

import unittest

import verdicts as v
from table import render_table, summary


class TableTest(unittest.TestCase):
    def rows(self):
        return [v.equal("nvml gpu0", "name", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
                v.mib("nvml gpu0", "used_bytes", 1024 * (1 << 20), [1024, 1025]),
                v.skipped("genscope run child", "`genscope run` not built"),
                v.failed("demo", "-", "x" * 300),
                v.info("sampler cost", "sample()", "12.00 us", "bare 11.00 us")]

    def test_columns_line_up(self):
        text = render_table(self.rows())
        lines = text.rstrip("\n").split("\n")
        self.assertEqual(lines[0].split()[:7], ["check", "figure", "genscope", "independent",
                                                "rule", "verdict", "note"])
        self.assertTrue(set(lines[1]) <= {"-", " "})
        verdict_at = lines[0].index("verdict")
        for line in lines[2:]:
            self.assertIn(line[verdict_at:verdict_at + 4], ("PASS", "FAIL", "SKIP", "INFO"), line)
        self.assertEqual(len(lines), 2 + len(self.rows()))

    def test_long_cells_are_cut_one_line_per_row(self):
        row = v.failed("demo", "-", "line one\nline two " + "y" * 300)
        text = render_table([row], max_note=40)
        body = text.split("\n")[2]
        self.assertTrue(body.endswith("..."))
        self.assertIn("line one line two", body)
        self.assertEqual(text.count("\n"), 3)

    def test_empty(self):
        self.assertEqual(len(render_table([]).rstrip("\n").split("\n")), 2)

    def test_summary_counts_each_verdict(self):
        self.assertEqual(summary(self.rows()),
                         "5 rows: 2 passed, 1 failed, 1 skipped, 1 measured")


if __name__ == "__main__":
    unittest.main()
