"""A Session: one kernel's conversation, as a test on the grader's side sees it.

verdicts.py runs a test cell on the grader's side; every time the test touches a student object it goes
through the Session: `ask` makes a request (a pickle: arguments by value, `Remote` handles by id, the test's
own objects lent: lending.py) with the refusals, meters and modes open on the test's side, sends it over the
transport (transport.py), reads the answer (codec.py), and applies what it says: the student's error by kind,
memory and work added to the open meters, in-place changes mirrored or refused, notes for review."""
import base64
import contextlib
import dataclasses
import json
import pickle

import numpy as np

from . import crashes, in_kernel
from .codec import decode, readable_in_any_course_kernel
from .lending import Lender, LendThis, float_tensors, no_modes
from .wire import BUILTIN_ERRORS, MAX_ANSWER_CHARS, MAX_ESCAPED_CHARS, GraderSideError, KernelRefused, NoAnswer


@dataclasses.dataclass
class _Request:
    """One call to the kernel as the test's side sent it."""
    op: str
    target: object
    forbidden: tuple                  # operators the exercise forbids (cu.forbid)
    in_place: bool                    # the test replays the student's pieces: changes to inputs are mirrored
    only: tuple | None                # launcher_only: the PyTorch the launcher may use besides kernels
    meters: dict                      # {"memory": open TensorMemory blocks, "work": open count_work blocks}
    direct: bool = False              # sent by the session's own transport (not a lent object's nested question)
    outside: bool = False             # the call's memory is read from the kernel's cgroup
    watched: bool = False             # other processes in the kernel's cgroup are looked for
    payload: bytes = b""


class Session:
    """One kernel's conversation: `transport(bytes, answer_callback) -> answer text`; what it lends, `lending`."""

    def __init__(self, transport, meter=None, deadline=None, cgroup=None):
        self.lending = Lender(self.ask, meter, deadline)  # meter.Meter: where the kernel's Triton launches run
        self.meter = meter
        self.transport = transport
        self.cgroup = cgroup  # sandbox.KernelCgroup: the kernel's processes and resident memory, read from outside
        self.notes = []  # what a reviewer should see about the answers (work a measurement could not see)
        self.moves = ()  # where the student's source moves tensor data out of torch's sight (flags.data_moves)

    def take_notes(self):
        """The notes made since the last call, for the caller to flag (job.event "integrity")."""
        notes, self.notes = self.notes, []
        return notes

    def ask(self, op, target, args, kwargs, label):
        if self.lending.conversing():  # a lent object uses the student's objects while the kernel waits for it
            return self._ask(op, target, args, kwargs, label, self._nested_transport)
        with no_modes():  # the test's own modes (forbid, TensorMemory) are sent with the request, for the kernel's work
            try:
                return self._ask(op, target, args, kwargs, label, self.transport)
            finally:
                self.lending.end_request()

    def _nested_transport(self, payload, answer_callback):
        """A request made while the kernel waits for the answer to its question: sent as that answer
        ("request", payload); the kernel serves it and asks again with {"op": "answer", "text": ...},
        asking its own questions about lent objects first if the request needs them."""
        converse = self.lending.conversing()
        prompt = converse(base64.b64encode(pickle.dumps(("request", payload), protocol=4)).decode())
        while True:
            try:
                question = json.loads(prompt) if isinstance(prompt, str) and len(prompt) <= MAX_ESCAPED_CHARS else None
            except ValueError:
                question = None
            if type(question) is dict and question.get("op") == "answer":
                return question.get("text")
            prompt = converse(answer_callback(prompt, converse))

    def _ask(self, op, target, args, kwargs, label, transport):
        request = self._request(op, target, args, kwargs, transport)
        if request.direct:
            self.lending.begin_call(args, kwargs, request.meters["work"])
        text, resident = self._send(request, label, transport)
        answer = self._read(text, label)
        record = self.lending.call_record()
        if not answer.get("ok"):
            self._refuse(answer, request, label if op != "get" else target, record.refusal)
        value = decode(answer.get("value"), self.lending.lent, self.ask, label)
        if self.meter is not None and request.only is not None and request.meters["work"] and request.direct:
            from_kernels(value, record.launched, label)
        absorb(answer, request.meters, resident)
        self._note_unseen(answer, request, label)
        self._note_counted_inside(request, resident, label)
        self._mirror_changes(answer, request, args, kwargs, label)
        return value

    def _request(self, op, target, args, kwargs, transport):
        """The pickled request, with the refusals, meters and modes open on the test's side at this call."""
        from course_utils.ambient import active
        now = active()  # what the test's side has open (course_utils/ambient.py): the one read of it
        r = _Request(op=op, target=target, forbidden=now.forbidden, in_place=now.in_place, only=now.launcher_only,
                     meters={"memory": now.memory, "work": now.work}, direct=transport is self.transport)
        asked = tuple(kind for kind, open_blocks in r.meters.items() if open_blocks)
        seen = self.cgroup is not None and r.direct  # the kernel's cgroup, read from here
        r.outside = seen and any(m.resident for m in r.meters["memory"])
        asked += ("resident",) * r.outside  # the kernel's cgroup measures the call: no in-kernel watch to inflate it
        r.watched = seen and bool(r.forbidden or r.meters["memory"])
        stand_ins = {name: LendThis(part) for name, part in now.stand_ins.items()}
        try:
            r.payload = self.lending.pickle((op, target, tuple(args), dict(kwargs), r.forbidden, asked, r.in_place,
                                      stand_ins, r.only))
            readable_in_any_course_kernel(r.payload)
        except (pickle.PicklingError, TypeError, AttributeError, pickle.UnpicklingError) as e:
            raise GraderSideError(f"the test's arguments could not be sent ({type(e).__name__}: {str(e)[:200]})") from None
        return r

    def _send(self, request, label, transport):
        """(the kernel's answer text, what the call held as its cgroup reads it, or None); raises what the grader's
        side of the call met (a failure of its own, a launch past the cell's limit)."""
        if request.watched:
            self._other_processes(label, request.forbidden)
        floor = self._floor(transport) if request.outside else 0
        window = self.cgroup.start() if request.outside else None
        text = transport(request.payload, self.lending.answer_callback)
        resident = self.cgroup.added(window, floor) if window is not None else None
        if request.watched:
            self._other_processes(label, request.forbidden)
        record = self.lending.call_record()
        if record.grader_failure is not None:
            raise record.grader_failure
        if record.timeout is not None:
            raise TimeoutError(f"{label}: your Triton kernel did not finish within the cell's time limit")
        return text, resident

    def _floor(self, transport):
        """What a request that runs none of the student's code holds, read from the kernel's cgroup as a call's
        memory is (KernelCgroup.added's floor): the request machinery's own touch of the kernel's objects, measured
        just before each call whose memory the cgroup decides."""
        window = self.cgroup.start()
        transport(self.lending.pickle(("get", "__name__", (), {}, (), (), False, {}, None)), self.lending.answer_callback)
        return self.cgroup.added(window) or 0

    def _read(self, text, label):
        """The answer as a dict; a claim that the kernel could not read the request is the student's, and so is a
        kernel that replied with no answer of the grader's own code (the transport's NoAnswer: wire.KernelRefused)."""
        if type(text) is NoAnswer:
            self.notes.append(f"the grader's request for {str(label)[:80]} {text.why}: charged to the submission (what "
                              "its code installed or replaced in the kernel stopped or rewrote the grader's requests)")
            raise KernelRefused(f"{label}: the grader's request {text.why}. Something your notebook installed or "
                                "replaced in the kernel (an audit hook, Python's built-ins, IPython's formatters or its "
                                "execution machinery) stops or rewrites the grader's requests: restart the kernel and "
                                "leave them alone")
        if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
            raise GraderSideError("no answer, or an answer too large")
        try:
            answer = json.loads(text)
        except ValueError:
            raise GraderSideError("an answer that is not JSON") from None
        if type(answer) is not dict:
            raise GraderSideError("an answer that is not a JSON object")
        if "grader" in answer:  # a claim: the grader checked that every kernel of the course can read this request
            self.notes.append(f"the kernel could not read the grader's request for {str(label)[:80]}, which any "
                              "kernel with the course's packages reads: something it needs was replaced")
            raise AssertionError(f"{label}: your kernel could not read the grader's request (something in it that "
                                 "unpickling needs, in torch, numpy or io, was replaced); restart it and leave them alone")
        return answer

    def _refuse(self, answer, request, name, launch_refusal=None):
        """Raise what a failed call means for the test: the student's error, named by kind (never its text).
        launch_refusal: why the grader's meter refused a Triton launch of the call (CallRecord.refusal)."""
        from course_utils.checks import ForbiddenCall
        kind = str(answer.get("error"))
        if kind == "Tampered":
            self.notes.append(f"while {str(name)[:80]} was asked, the kernel's own Python (its built-ins, "
                              "pickle, binascii or marshal) was not what C made: the request was refused")
            raise AssertionError(f"{name}: the grader's channel into your kernel found Python's own functions "
                                 "replaced (builtins, pickle, binascii or marshal), so no answer of this "
                                 "kernel can be trusted; restart the kernel and leave them alone")
        if kind == "Unrefused":
            switched = request.forbidden[0] if request.forbidden else "the launcher's allow-list"
            self.notes.append(f"while {str(name)[:80]} ran, its code switched off the refusal of {switched} (a refusal "
                              "block exited or its kernels unregistered during the call): the call was refused")
            raise ForbiddenCall(f"{name}: while your code ran, the grader's refusal of {switched} was switched off "
                                "(a block exited early, or its kernels unregistered), so the call is refused: build it "
                                "yourself and leave the refusal alone.")
        if launch_refusal is not None:
            raise AssertionError(f"{name}: the grader cannot run your kernel as a Triton kernel: "
                                 f"{launch_refusal}. A kernel may use tl.*, other @triton.jit functions, "
                                 "constants, and range, min, max, float, int, bool, len, abs, isinstance.")
        if kind == "ForbiddenCall":
            used, forbidden, only = answer.get("forbidden"), request.forbidden, request.only
            if only is not None and type(used) is str and used.startswith("torch.ops.aten.") and used not in forbidden:
                raise ForbiddenCall(f"{name} computed with {used[:80]} in PyTorch, where this exercise asks your "
                                    "Triton kernel to compute: the launcher only allocates, views and copies "
                                    "tensors and launches kernels" + (f" (and may use {', '.join(only)})" if only
                                                                      else "") + ".")
            used = used if used in forbidden else (forbidden[0] if forbidden else "a forbidden operator")
            raise ForbiddenCall(f"{name} called {used}, which this exercise asks you to build yourself.")
        if request.op == "get" and kind == "NameError":
            raise NameError(f"name {request.target!r} is not defined in your notebook: run the cell that defines it, "
                            "and keep the name the exercise gives")
        if kind == "TooLarge":
            raise AssertionError(f"{name} returned more data than the grader accepts")
        error = BUILTIN_ERRORS.get(kind, RuntimeError)
        if kind == "NotImplementedError":
            raise error(f"{name} raised NotImplementedError (the exercise is not done yet?)")
        what = crashes.sentence(answer)
        raise error(f"{name} raised {kind}" + (f" in {what}" if what else "")
                    + "; run this test cell in your notebook to see the details")

    def _note_unseen(self, answer, request, label):
        unseen = answer.get("unseen")
        if request.meters["memory"] and type(unseen) is list and unseen:
            what = "; ".join(in_kernel.UNSEEN[w] for w in sorted({w for w in unseen if w in in_kernel.UNSEEN}))
            self.notes.append(f"while its memory was measured, {label[:80]} {what or 'did unseen work'} (the count "
                              "covers torch calls in the calling thread): check its memory test by hand")

    def _note_counted_inside(self, request, resident, label):
        """A memory test the kernel's cgroup was to decide, measured by the kernel's own count only (no cgroup:
        grading without root), in a submission whose source moves tensor data to numpy or raw memory, where that
        count cannot see it: noted for review with the lines (read from the notebook, not from the kernel)."""
        if resident is None and request.direct and self.moves and any(m.resident for m in request.meters["memory"]):
            where = "; ".join(self.moves[:4]) + (" ..." if len(self.moves) > 4 else "")
            note = (f"the memory of {str(label)[:80]} was counted only in the kernel (no cgroup: grading without "
                    f"root), which sees no numpy or raw memory, and the notebook moves tensor data there ({where}): "
                    "check its memory test by hand")
            if note not in self.notes:
                self.notes.append(note)

    def _mirror_changes(self, answer, request, args, kwargs, label):
        """Inputs the call changed in place: mirrored where the test replays the student's pieces, else refused."""
        changed = answer.get("changed") or []
        if request.in_place and type(changed) is dict:
            for key, new in changed.items():
                index = int(key) if key.isdigit() else key
                source = args[index] if isinstance(index, int) and index < len(args) else kwargs.get(index)
                copy_back(source, decode(new, self.lending.lent, self.ask, label))
        elif changed:
            names = ", ".join(f"argument {int(k) + 1}" if str(k).isdigit() else f"{str(k)[:40]}="
                              for k in changed[:8] if type(k) is str)
            raise AssertionError(f"{label} changed its input in place ({names}): leave its inputs unchanged "
                                 "(work on a copy, or build a new tensor)")

    def _other_processes(self, label, forbidden):
        """Processes in the kernel's cgroup besides the kernel's own (read here, from outside) could compute what a
        test forbids, or hold memory it measures: refused where an operator is forbidden, else noted for review."""
        from course_utils.checks import ForbiddenCall
        others = self.cgroup.others()
        if not others:
            return
        what = (f"{len(others)} process{'es' * (len(others) > 1)} besides the kernel (started by its code: a server, "
                "a pool or one orphaned by an intermediate)")
        if forbidden:
            raise ForbiddenCall(f"{str(label)[:80]}: while this test ran, your kernel's sandbox held {what}, which "
                                "could compute what the exercise forbids; end them (or do not start them) before the "
                                "test")
        self.notes.append(f"while its memory was measured, {str(label)[:80]} ran beside {what}, whose work the "
                          "count cannot see: check its memory test by hand")

    def fetch(self, name):
        return self.ask("get", name, (), {}, name)


def copy_back(original, changed):
    """Mirror an in-place change the student's code made to a tensor or array argument (cu.in_place_allowed)."""
    import torch
    if isinstance(original, torch.Tensor) and isinstance(changed, torch.Tensor):
        if original.shape == changed.shape and original.dtype == changed.dtype:
            with torch.no_grad(), contextlib.suppress(RuntimeError):  # (an expanded view cannot be written)
                original.copy_(changed)
    elif type(original) is np.ndarray and type(changed) is np.ndarray:
        if original.shape == changed.shape and original.dtype == changed.dtype and original.flags.writeable:
            np.copyto(original, changed)


def absorb(answer, meters, resident=None):
    """Add one call's memory to every open TensorMemory block: the kernel's figures (ints only; anything else in
    the answer is ignored) and `resident`, what the kernel's memory cgroup gained during the call, measured here
    (None: not measured). Triton work is never the kernel's figure: the grader's meter counts it (_launch)."""
    memory = answer.get("memory")
    if not (type(memory) is list and len(memory) == 2 and all(type(x) is int for x in memory)):
        memory = [0, 0]
    for meter in meters["memory"]:
        meter.absorb(*(max(0, x) for x in memory), resident)


def from_kernels(value, launched, label):
    """AssertionError unless every floating-point value the call returned is one its kernels stored (in the
    grader's meter: `launched`, one array per launch), as stored or cast to the returned dtype: where an exercise
    asks a kernel to compute, a result made anywhere else (PyTorch, numpy, an interpreter the grader never saw)
    holds values no kernel stored. NaN is left to the test's value checks."""
    import torch
    stored = np.unique(np.concatenate(launched)) if launched else np.zeros(0)
    for tensor in (t for t in float_tensors(value) if t.numel()):
        values = tensor.detach().double().numpy().ravel()
        values = values[~np.isnan(values)]
        candidates = np.union1d(stored, torch.from_numpy(stored).to(tensor.dtype).double().numpy())
        missing = int((~np.isin(values, candidates)).sum())
        if missing:
            raise AssertionError(
                f"{label} returned {missing} of {values.size} values that none of your Triton kernels stored "
                f"({len(launched)} launch(es) ran): in this exercise the result is what your kernel stores, and the "
                "launcher only allocates, views and copies tensors and launches kernels.")
