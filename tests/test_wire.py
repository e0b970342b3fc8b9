"""The doorway between the trusted host and its worker processes is typed: every message is a record of
``sandbox.wire`` that survives pickling, is checked when made, and is read by attribute on both sides (no
string-keyed reads of requests and replies in the worker's handlers or the host modules that talk to them);
the worker roles that need no GPU answer records end to end."""

from __future__ import annotations

import ast
import pickle
import types
import typing
from pathlib import Path

import numpy as np
import pytest

from sandbox import wire
from sandbox.host.pool import WorkerProcess
from sandbox.wire import (Compare, CompareTask, CompareTrial, Compared, Compares, Compile, Compiled, Confinement,
                          ConfinementReport, DescribeDevice, Message, Reply, Request, RunOutputs, Trial, WireError,
                          WorkerError,
                          tolerances)

ROOT = Path(__file__).resolve().parents[1]

# The worker's handlers, and every module on the host side that builds requests or reads replies.
DOORWAY_MODULES = [
    *(f"sandbox/worker/{m}.py" for m in ("main", "checks", "timing", "screening", "reference", "ceilings", "draw",
                                         "launcher", "launch_guards", "baseline_agreement", "kept", "stage_clocks",
                                         "stage_memory", "rounds", "ahead", "profile_target", "sanitize_target")),
    *(f"sandbox/host/{m}.py" for m in ("pool", "gpu", "timing", "builder", "referee", "screener", "probe", "sanitizer",
                                       "profiler", "ceilings", "check_task", "compile_only")),
    "agent/cli/best.py", "agent/cli/doctor.py",
]
# Names the doorway's messages go by in those modules (and ``self.req``, the request a stage keeps).
MESSAGE_NAMES = {"req", "request", "reply", "msg", "sent", "got", "hello", "tr", "trial", "done", "case", "begin",
                 "spare", "ended", "target"}


def _is_message(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in MESSAGE_NAMES
    return (isinstance(node, ast.Attribute) and node.attr == "req" and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def doorway_reads(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` reads a message by string key (``req["sizes"]``, ``reply.get("error")``) or names an
    operation by string (an ``"op"`` key), as ``file:line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        what = None
        if isinstance(node, ast.Subscript) and _is_message(node.value) and _key(node.slice):
            what = f"[{_key(node.slice)!r}]"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _is_message(node.func.value) and node.args and _key(node.args[0])):
            what = f".get({_key(node.args[0])!r})"
        elif isinstance(node, ast.Dict) and "op" in [_key(k) for k in node.keys if k is not None]:
            what = "a dict with an 'op' key"
        elif isinstance(node, ast.keyword) and node.arg == "op":
            what = "op="
        if what:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {what}")
    return found


def test_no_request_or_reply_is_read_by_string_key_at_either_end_of_the_doorway():
    found = [hit for module in DOORWAY_MODULES for hit in doorway_reads(ROOT / module)]
    assert not found, "read the records of sandbox.wire by attribute:\n" + "\n".join(found)


def test_the_rule_sees_a_dict_protocol(tmp_path):
    old = tmp_path / "old.py"
    old.write_text('def handle(req, reply):\n    if req["op"] == "check":\n        return reply.get("error")\n'
                   'send(dict(op="hello"), {"op": "time"})\n')
    found = doorway_reads(old, tmp_path)
    assert sorted(f.split(":", 1)[1] for f in found) == ["2: ['op']", "3: .get('error')", "4: a dict with an 'op' key",
                                                         "4: op="]


@pytest.mark.parametrize("record", [wire.TargetStart, wire.WaitAhead, wire.ProfileLaunches, wire.SanitizeCases,
                                    wire.TargetRan], ids=lambda r: r.__name__)
def test_every_record_of_a_tools_target_survives_its_json_file(record):
    value = _example(record)
    assert wire.from_json(wire.to_json(value), record) == (value,)


def test_a_programs_file_holds_its_records_side_by_side_and_nothing_else():
    begin, cases = wire.TargetStart("sm_90", "h.cubin", "s.json"), wire.SanitizeCases("c", [], 5)
    assert wire.from_json(wire.to_json(begin, cases), wire.TargetStart, wire.SanitizeCases) == (begin, cases)
    with pytest.raises(WireError, match="TargetStart has no field cases, cubin, seed"):
        wire.from_json(wire.to_json(begin, cases), wire.TargetStart)
    with pytest.raises(WireError, match=r"SanitizeCases\.seed must be int"):
        wire.from_json('{"cubin": "c", "cases": [], "seed": "5"}', wire.SanitizeCases)
    assert wire.written("/nowhere/status.json", wire.TargetRan) is None


def _example(hint):
    """A value of type ``hint`` (records filled in field by field)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _example(next(a for a in args if a is not type(None)))
    if origin is list:
        return [_example(args[0])]
    if origin is dict:
        return {_example(args[0]): _example(args[1])}
    if isinstance(hint, type) and issubclass(hint, Message):
        return hint(**{name: _example(h) for name, h in typing.get_type_hints(hint).items()})
    return {str: "x", int: 3, float: 1.5, bool: True, bytes: b"\x00cubin"}.get(hint, {"any": [1, 2.0]})


@pytest.mark.parametrize("record", wire.RECORDS, ids=lambda r: r.__name__)
def test_every_record_survives_the_pipe_and_holds_data_only(record):
    value = _example(record)
    again = pickle.loads(pickle.dumps(value))
    assert again == value and type(again) is record
    assert not any(callable(getattr(value, name)) for name in typing.get_type_hints(record))


def test_every_operation_has_a_request_and_replies_know_whether_they_succeeded():
    requests = {c for c in wire.RECORDS if issubclass(c, Request)}
    replies = {c for c in wire.RECORDS if issubclass(c, Reply)}
    assert {c.__name__ for c in requests} == {"DescribeDevice", "MeasureCeilings", "Confinement", "Compile", "CheckTrials",
                                              "Time", "IpcProbe", "IpcRead", "Compare", "Compares", "ScreenSetup", "Screen",
                                              "ProfileLaunches", "SanitizeCases"}
    assert all(_example(c).ok for c in replies - {WorkerError}) and not WorkerError("x").ok


def test_a_field_of_the_wrong_type_or_a_missing_one_is_one_clear_error():
    with pytest.raises(WireError, match=r"Trial\.seed must be int, not str"):
        Trial(label="t", sizes={"n": 4}, plan={}, inputs=[], outputs=[], seed="7")
    with pytest.raises(WireError, match=r"Trial\.sizes must be dict\[str, int\], not dict"):
        Trial(label="t", sizes={"n": "4"}, plan={}, inputs=[], outputs=[], seed=7)
    with pytest.raises(WireError, match=r"Compares\.trials must be list\[CompareTrial\], not list"):
        Compares(CompareTask(task_folder="t", scalars={}, tolerance={}), [{"label": "a"}])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'seed'"):
        Trial(label="t", sizes={"n": 4}, plan={}, inputs=[], outputs=[])
    with pytest.raises(WireError, match="expected a Request .* got dict"):
        WorkerProcess("reference").call({"op": "hello"}, timeout=10)


@pytest.mark.timeout(60)
def test_a_worker_answers_what_is_no_request_with_an_error_not_a_crash(monkeypatch):
    monkeypatch.setattr("sandbox.host.pool.checked", lambda message, kind: message)  # let the dict through
    w = WorkerProcess("reference")
    try:
        reply = w.call({"op": "compare"}, timeout=30)
        assert isinstance(reply, WorkerError) and "expected a Request (sandbox.wire), got dict" in reply.error
        assert isinstance(w.call(DescribeDevice(), timeout=30), WorkerError) and w.started == 1   # the same worker goes on
    finally:
        w.close()


PLAN = '/*@kernelwright\n[[launch]]\nkernel = "k"\ngrid = "1"\nblock = "32"\nargs = []\n@*/\n'


@pytest.mark.timeout(180)
def test_the_compile_worker_answers_records(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    w = WorkerProcess("compile")
    try:
        state = w.call(Confinement(), timeout=120)
        assert isinstance(state, ConfinementReport) and (state.confined or state.reason)
        good = w.call(Compile(source=PLAN + 'extern "C" __global__ void k() {}\n', flags=[], knobs={}, arch="sm_90",
                              cache=False), timeout=120)
        assert isinstance(good, Compiled) and good.info["ok"] and good.cubin
        bad = w.call(Compile(source=PLAN + 'extern "C" __global__ void k() { nope; }\n', flags=[], knobs={},
                             arch="sm_90", cache=False), timeout=120)
        assert isinstance(bad, Compiled) and not bad.info["ok"] and bad.cubin is None and "nope" in bad.info["log"]
    finally:
        w.close()


@pytest.mark.timeout(120)
def test_the_reference_worker_compares_a_stage_sent_as_records(tmp_path):
    from sandbox import load_task
    from sandbox.tasks.inputs import input_specs, output_specs
    from sandbox.worker.harness import reference_inputs

    task = load_task("vector_add")
    sizes = {"n": 1000}
    specs = input_specs(task, sizes, 0)
    ins = reference_inputs(np, specs, 11)
    np.save(tmp_path / "c.npy", (ins["a"] + ins["b"]).astype(np.float32))
    trial = CompareTrial(label="t", sizes=task.env(sizes), inputs=specs, outputs=output_specs(task, sizes), seed=11,
                         runs=[RunOutputs("run1", {"c": str(tmp_path / "c.npy")})])
    shared = CompareTask(task_folder=str(task.folder), scalars={}, tolerance=tolerances(task), backend="numpy")
    w = WorkerProcess("reference")
    try:
        reply = w.call(Compares(shared, [trial]), timeout=60)
        one = w.call(Compare(shared, trial), timeout=60)
    finally:
        w.close()
    assert isinstance(reply, Compared) and [t.label for t in reply.trials] == ["t"]
    assert [(c.output, c.run, c.passed) for c in reply.trials[0].checks] == [("c", "run1", True)]
    assert one.checks == reply.trials[0].checks


@pytest.mark.timeout(120)
def test_the_sandbox_answers_doctor_and_best_without_their_speaking_the_protocol():
    import sandbox

    state = sandbox.confinement()
    assert isinstance(state, ConfinementReport) and (state.confined or state.reason)
    try:
        device = sandbox.probe_device()
    except sandbox.NoDevice as exc:  # a machine without a GPU: the worker's reason
        assert str(exc)
    else:
        assert device["arch"].startswith("sm_")
