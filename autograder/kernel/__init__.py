"""The kernel boundary: every way the grader and a student's kernel reach each other, one module a job.

A test cell runs here, on the grader's side (`verdicts`); each time it touches a student's object, a `Session`
asks the kernel. Read in this order:

- `verdicts`: a lesson's tests, run on the grader's side, with their set-up; the verdict is decided here.
- `session`: one kernel's conversation: a request made, sent, its answer read and applied (errors by kind,
  meters, in-place changes, notes for review).
- `lending`: what a test defines stays here; the kernel gets stand-ins whose every use is a question back.
- `codec`: answers decoded strictly into plain values and `Remote` handles; requests checked readable.
- `transport`: one request over Jupyter (a silent execute, questions on stdin) or in this process.
- `wire`: the limits, allow-lists and errors of the boundary, in one place.
- `in_kernel/`: the grader's program in the student's kernel: one program in seven parts, each using only
  earlier ones, sent with every request (the integrity check sends its own, below).
- `integrity`: after each test cell, what the tests rely on in the kernel is compared with a baseline
  (a flag for review, never a score).
- `meter`: lesson 11's Triton launches run and counted in a process of the grader's, never in the kernel.
"""
