"""What the kernel's process may not do to itself, set by the launcher's stub before it becomes the kernel (its source is
run there, launcher.STUB: standard library only, no import of this package), inherited by every process it starts:

- `deny_proc_writes`: no file under /proc or /sys may be opened for writing (Linux's Landlock, 5.13 or newer): above
  all /proc/self/clear_refs, which would clear the accessed bits by which the grader sees memory resident before a
  measured call that the call touched (cgroups.KernelCgroup), and /proc/self/mem;
- `deny_forgetting`: madvise's MADV_COLD, MADV_PAGEOUT and MADV_FREE and process_madvise are refused (EPERM), and so
  is any system call of another architecture's table (a seccomp filter): each clears those bits too.

Each returns whether it holds; where the running Linux lacks it, the launcher warns and the gap is the manual's.
"""
import ctypes
import os
import platform
import struct

_SYSCALLS = {"x86_64": (0xC000003E, 28), "aarch64": (0xC00000B7, 233)}  # (AUDIT_ARCH, madvise's number)
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF, _PROCESS_MADVISE = 444, 445, 446, 440
_WRITE_FILE = 1 << 1  # LANDLOCK_ACCESS_FS_WRITE_FILE
_MADV_FREE, _MADV_COLD, _MADV_PAGEOUT = 8, 20, 21


def deny_proc_writes():
    """Landlock: writing a file is allowed beneath every top-level folder but /proc and /sys."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.c_uint64(_WRITE_FILE)  # struct landlock_ruleset_attr {__u64 handled_access_fs}
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8), 0)
    if ruleset < 0:
        return False
    try:
        for name in os.listdir("/"):
            if name in ("proc", "sys"):
                continue
            try:
                folder = os.open("/" + name, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rule = ctypes.create_string_buffer(struct.pack("=Qi", _WRITE_FILE, folder))  # landlock_path_beneath_attr
            libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, rule, 0)  # LANDLOCK_RULE_PATH_BENEATH
            os.close(folder)
        return libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


def deny_forgetting():
    """seccomp: madvise's advice that clears accessed bits, process_madvise and foreign tables refused with EPERM."""
    if platform.machine() not in _SYSCALLS:
        return False
    arch, madvise = _SYSCALLS[platform.machine()]
    load, jump, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, refuse = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    program = [
        (load, 0, 0, 4), (jump, 1, 0, arch), (ret, 0, 0, refuse),  # seccomp_data.arch: another table is refused
        (load, 0, 0, 0), (0x35, 0, 1, 0x40000000), (ret, 0, 0, refuse),  # nr >= x32's base (BPF_JGE): refused
        (jump, 6, 0, _PROCESS_MADVISE), (jump, 0, 4, madvise),
        (load, 0, 0, 32),  # seccomp_data.args[2], its low half: the advice
        (jump, 3, 0, _MADV_FREE), (jump, 2, 0, _MADV_COLD), (jump, 1, 0, _MADV_PAGEOUT),
        (ret, 0, 0, allow), (ret, 0, 0, refuse)]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *f) for f in program))
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(filters))  # struct sock_fprog
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(22, 2, ctypes.create_string_buffer(fprog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
