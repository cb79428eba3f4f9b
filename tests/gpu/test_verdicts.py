"""The comparison rules of the GPU check table (verdicts.py), at and around their edges."""

import math
import unittest

import verdicts as v

MIB = 1 << 20


class EqualTest(unittest.TestCase):
    def test_equal_and_not(self):
        self.assertEqual(v.equal("c", "f", 5, 5).verdict, v.PASS)
        self.assertEqual(v.equal("c", "f", "NVIDIA H100", "NVIDIA H100 PCIe").verdict, v.FAIL)
        self.assertEqual(v.equal("c", "f", 268435456, 268435457, "B").verdict, v.FAIL)

    def test_unavailable_on_both_sides_agrees_on_one_side_fails(self):
        self.assertEqual(v.equal("c", "f", None, None).verdict, v.PASS)
        self.assertEqual(v.equal("c", "f", float("nan"), None).verdict, v.PASS)
        row = v.equal("c", "f", None, 3)
        self.assertEqual(row.verdict, v.FAIL)
        self.assertIn("one side", row.note)
        self.assertEqual(v.equal("c", "f", 3, None).verdict, v.FAIL)


class BracketTest(unittest.TestCase):
    def test_inside_edges_and_outside(self):
        self.assertEqual(v.bracket("c", "t", 31, [31, 31], 1, "C").verdict, v.PASS)
        self.assertEqual(v.bracket("c", "t", 32, [30, 31], 1, "C").verdict, v.PASS)
        self.assertEqual(v.bracket("c", "t", 29, [30, 31], 1, "C").verdict, v.PASS)
        self.assertEqual(v.bracket("c", "t", 33, [30, 31], 1, "C").verdict, v.FAIL)
        self.assertEqual(v.bracket("c", "t", 28.9, [30, 31], 1, "C").verdict, v.FAIL)

    def test_readings_shown_as_a_range(self):
        row = v.bracket("c", "p", 70.0, [69.5, 71.25], 5, "W")
        self.assertEqual(row.independent, "69.5..71.25 W")
        self.assertEqual(row.rule, "bracket ±5 W")

    def test_one_reading_unavailable_fails(self):
        row = v.bracket("c", "p", 70.0, [None, 70.0], 5, "W")
        self.assertEqual(row.verdict, v.FAIL)
        self.assertIn("one of its reads", row.note)

    def test_not_supported_on_both_sides(self):
        self.assertEqual(v.bracket("c", "p", None, [None, None], 5, "W").verdict, v.PASS)
        self.assertEqual(v.bracket("c", "p", 70.0, [None, None], 5, "W").verdict, v.FAIL)


class MibTest(unittest.TestCase):
    def test_bytes_against_whole_mib(self):
        self.assertEqual(v.mib("c", "used", 2052 * MIB, [2052, 2052]).verdict, v.PASS)
        # nvidia-smi's whole MiB may be rounded either way: within 1 MiB passes
        self.assertEqual(v.mib("c", "used", 2052 * MIB + MIB // 2, [2052, 2052]).verdict, v.PASS)
        self.assertEqual(v.mib("c", "used", 2053 * MIB, [2052, 2052]).verdict, v.PASS)
        self.assertEqual(v.mib("c", "used", 2053 * MIB + 1, [2052, 2052]).verdict, v.FAIL)
        self.assertEqual(v.mib("c", "used", 2050 * MIB, [2052, 2052]).verdict, v.FAIL)

    def test_moving_memory_is_bracketed(self):
        self.assertEqual(v.mib("c", "used", 3000 * MIB, [2052, 4100]).verdict, v.PASS)

    def test_rendering(self):
        row = v.mib("c", "used", 1536 * MIB, [1536, 1536])
        self.assertEqual(row.genscope, "1536.00 MiB")
        self.assertEqual(row.independent, "1536 MiB")
        self.assertEqual(row.rule, "MiB bracket ±1 MiB")


class OtherRulesTest(unittest.TestCase):
    def test_within(self):
        self.assertEqual(v.within("c", "f", 10.0, 12.0, 2).verdict, v.PASS)
        self.assertEqual(v.within("c", "f", 10.0, 12.5, 2).verdict, v.FAIL)

    def test_at_least(self):
        self.assertEqual(v.at_least("c", "len", 1.2, 1.2, "s").verdict, v.PASS)
        self.assertEqual(v.at_least("c", "len", 1.19, 1.2, "s").verdict, v.FAIL)
        self.assertEqual(v.at_least("c", "len", None, 1.2, "s").verdict, v.FAIL)

    def test_holds_skipped_failed_info(self):
        self.assertEqual(v.holds("c", "f", True, "a", "b", "r").verdict, v.PASS)
        self.assertEqual(v.holds("c", "f", False, "a", "b", "r").verdict, v.FAIL)
        self.assertEqual(v.skipped("c", "why").verdict, v.SKIP)
        self.assertEqual(v.skipped("c", "why").note, "why")
        self.assertEqual(v.failed("c", "f", "why").verdict, v.FAIL)
        self.assertEqual(v.info("c", "f", "3 us").verdict, v.INFO)

    def test_render(self):
        self.assertEqual(v.render(None), "n/a")
        self.assertEqual(v.render(math.nan, "W"), "n/a")
        self.assertEqual(v.render(69.53, "W"), "69.53 W")
        self.assertEqual(v.render(1980000000.0), "1980000000")
        self.assertEqual(v.render(7), "7")

    def test_rows_serialise(self):
        d = v.equal("c", "f", 1, 1).as_dict()
        self.assertEqual(set(d), {"check", "figure", "genscope", "independent", "rule",
                                  "verdict", "note"})


if __name__ == "__main__":
    unittest.main()
