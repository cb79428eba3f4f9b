"""The package's recorder replaying message streams real ComfyUI versions sent
(tests/fixtures/comfyui_messages/*.json: recorded by `genscope comfyui selftest --record` on
v0.3.18 and 0.3.64 — data, not code): every prompt again through the recorder, as the
message stream (v0.3.18's way) and, where ComfyUI sent its per-node states (progress_state),
as node events (today's way), checked against what the stream itself says: the nodes ComfyUI
started, the cached ones, how the prompt ended, which node failed.

Run: PYTHONPATH=build/python python3 -m unittest discover -s integrations/comfyui/tests
"""

import glob
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_comfy  # noqa: E402

import genscope  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "comfyui_messages")


def expected(messages):
    """What the stream says: (nodes started, nodes cached, status, failed node)."""
    started, cached, status, failed = [], [], None, None
    for _, event, data in messages:
        if event == "executing" and data.get("node") is not None:
            if str(data["node"]) not in started:
                started.append(str(data["node"]))
        elif event == "execution_cached":
            cached = [str(n) for n in data.get("nodes") or []]
        elif event == "execution_success":
            status = "success"
        elif event == "execution_error" and data.get("exception_type") != "ExecutionBlocked":
            status, failed = "error", str(data.get("node_id"))
        elif event == "execution_interrupted":
            status, failed = "interrupted", str(data.get("node_id"))
    return started, cached, status, failed


def node_events(messages):
    """ComfyUI's progress_state messages (all node states after each start/update/finish of a
    node) turned back into the node events its progress registry raised: (kind, node)."""
    events, before = [], {}
    for _, event, data in messages:
        if event != "progress_state":
            continue
        now = {n: s.get("state") for n, s in (data.get("nodes") or {}).items()}
        for node, state in now.items():
            if state == "running" and before.get(node) != "running":
                events.append(("start", node))
            elif state == "finished" and before.get(node) != "finished":
                events.append(("finish", node))
        before = now
    return events


class RecordedStreamsTest(unittest.TestCase):
    def setUp(self):
        fake_comfy.remove_modules()
        package = fake_comfy.load_package()  # outside ComfyUI: not monitoring, modules loaded
        self.recorder_mod = sys.modules[package.__name__ + ".recorder"]
        self.files = sorted(glob.glob(os.path.join(FIXTURES, "*.json")))

    def tearDown(self):
        fake_comfy.remove_modules()

    def replay(self, entry, events):
        prompt, messages = entry["prompt"] or {}, entry["messages"]
        finished = []
        rec = self.recorder_mod.PromptRecorder(
            genscope.Monitor(nvml=False), lambda pid: (prompt, {"client_id": "selftest"}),
            lambda doc, summary: finished.append(doc))
        if events:
            rec.register_events = lambda recorder, prompt_id: None
            rec.is_async = lambda cls: "Async" in cls
        states = []
        for message in messages:
            _, event, data = message
            if events and event == "progress_state":
                # ComfyUI sends it from its own handler, called in the same loop as genscope's:
                # the node events this message reports, then the message
                done = len(node_events(states))
                states.append(message)
                for kind, node in node_events(states)[done:]:
                    (rec.node_started if kind == "start" else rec.node_finished)(
                        entry["prompt_id"], node)
            rec.on_message(event, data)
            rec.after_message()
        self.assertEqual(len(finished), 1, entry["name"])
        return finished[0]

    def check(self, entry, doc, events):
        started, cached, status, failed = expected(entry["messages"])
        labels = doc["labels"]
        where = f"{entry['name']} ({'node events' if events else 'messages'})"
        self.assertEqual(labels["comfyui.node_timing"], "node_events" if events else "messages")
        self.assertEqual(labels["comfyui.nodes_executed"], str(len(started)), where)
        self.assertEqual(labels["comfyui.nodes_cached"], str(len(cached)), where)
        self.assertEqual(labels["comfyui.status"], status, where)
        nodes = {s["labels"]["comfyui.node_id"] for s in doc["steps"]
                 if "comfyui.node_id" in s["labels"]}
        self.assertEqual(nodes, set(started) | set(cached), where)
        bad = [s["labels"]["comfyui.node_id"] for s in doc["steps"] if s["status"] == "failed"]
        self.assertEqual(bad, [failed] if failed else [], where)
        self.assertEqual([e["message"] for e in doc["monitoring_errors"]], [], where)
        return {s["labels"]["comfyui.node_id"]: s for s in doc["steps"]
                if "comfyui.node_id" in s["labels"]}

    def test_fixtures_exist(self):
        names = [os.path.basename(f) for f in self.files]
        self.assertIn("v0.3.18.json", names)
        self.assertIn("v0.3.64.json", names)

    def test_replay_as_messages_and_node_events(self):
        for path in self.files:
            with open(path) as f:
                recording = json.load(f)
            for entry in recording["prompts"]:
                with self.subTest(version=recording["comfyui_version"], prompt=entry["name"]):
                    self.check(entry, self.replay(entry, events=False), events=False)
                    if any(m[1] == "progress_state" for m in entry["messages"]):
                        steps = self.check(entry, self.replay(entry, events=True), events=True)
                        for node, step in steps.items():
                            cls = step["labels"]["comfyui.class_type"]
                            self.assertEqual(step["labels"].get("comfyui.async") == "true",
                                             "Async" in cls and node not in
                                             expected(entry["messages"])[1])


if __name__ == "__main__":
    unittest.main()
