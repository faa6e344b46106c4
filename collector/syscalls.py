"""System call names and the categories the models read (file read/write, network, poll, futex, ...)."""

from __future__ import annotations

from procsift.collector._syscall_table import X86_64

__all__ = ["CATEGORIES", "SYSCALL_NAMES", "UNKNOWN", "category_of", "name_of"]

UNKNOWN = "unknown"
"""Name given to a syscall number this table does not know (a newer kernel's call)."""

CATEGORIES: tuple[str, ...] = (
    "file_read", "file_write", "open_stat", "net_accept", "net_send", "net_recv",
    "poll", "futex", "sleep_timer", "memory", "process", "ioctl", "other",
)

_BY_CATEGORY: dict[str, tuple[str, ...]] = {
    "file_read": (
        "read", "pread64", "readv", "preadv", "preadv2", "readlink", "readlinkat",
        "getdents", "getdents64", "readahead", "getxattr", "lgetxattr", "fgetxattr",
        "listxattr", "llistxattr", "flistxattr", "getxattrat", "listxattrat",
    ),
    "file_write": (
        "write", "pwrite64", "writev", "pwritev", "pwritev2", "fsync", "fdatasync",
        "sync", "syncfs", "sync_file_range", "ftruncate", "truncate", "fallocate",
        "copy_file_range", "rename", "renameat", "renameat2", "unlink", "unlinkat",
        "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat",
        "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown",
        "fchownat", "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
        "setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr",
        "lremovexattr", "fremovexattr", "removexattrat",
    ),
    "open_stat": (
        "open", "openat", "openat2", "creat", "close", "close_range", "stat", "fstat",
        "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "lseek",
        "fcntl", "dup", "dup2", "dup3", "getcwd", "chdir", "fchdir", "statfs",
        "fstatfs", "umask", "flock", "name_to_handle_at", "open_by_handle_at",
        "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
        "fanotify_init", "fanotify_mark", "file_getattr", "file_setattr", "pipe", "pipe2",
    ),
    "net_accept": (
        "accept", "accept4", "listen", "bind", "socket", "socketpair", "connect",
        "getsockname", "getpeername", "setsockopt", "getsockopt",
    ),
    "net_send": ("sendto", "sendmsg", "sendmmsg", "sendfile", "splice", "tee", "vmsplice", "shutdown"),
    "net_recv": ("recvfrom", "recvmsg", "recvmmsg"),
    "poll": (
        "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
        "epoll_pwait2", "epoll_ctl", "epoll_create", "epoll_create1", "eventfd",
        "eventfd2", "signalfd", "signalfd4",
    ),
    "futex": ("futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
              "set_robust_list", "get_robust_list"),
    "sleep_timer": (
        "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
        "clock_settime", "clock_adjtime", "gettimeofday", "settimeofday", "time",
        "alarm", "setitimer", "getitimer", "timer_create", "timer_settime",
        "timer_gettime", "timer_getoverrun", "timer_delete", "timerfd_create",
        "timerfd_settime", "timerfd_gettime", "pause", "sched_yield", "times",
    ),
    "memory": (
        "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "mlock", "mlock2",
        "munlock", "mlockall", "munlockall", "msync", "mincore", "membarrier",
        "process_madvise", "mseal", "memfd_create", "pkey_mprotect", "pkey_alloc",
        "pkey_free", "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages",
        "move_pages", "userfaultfd", "map_shadow_stack", "remap_file_pages",
        "process_vm_readv", "process_vm_writev", "shmget", "shmat", "shmdt", "shmctl",
    ),
    "process": (
        "fork", "vfork", "clone", "clone3", "execve", "execveat", "exit", "exit_group",
        "wait4", "waitid", "kill", "tkill", "tgkill", "getpid", "getppid", "gettid",
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
        "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend",
        "sigaltstack", "prctl", "arch_prctl", "set_tid_address", "setpgid", "getpgid",
        "getpgrp", "setsid", "getsid", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
        "sched_setaffinity", "sched_getaffinity", "sched_setparam", "sched_getparam",
        "sched_setscheduler", "sched_getscheduler", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "sched_setattr",
        "sched_getattr", "getpriority", "setpriority", "ioprio_set", "ioprio_get",
        "getrlimit", "setrlimit", "prlimit64", "getrusage", "getuid", "geteuid",
        "getgid", "getegid", "setuid", "setgid", "setreuid", "setregid", "setresuid",
        "getresuid", "setresgid", "getresgid", "getgroups", "setgroups", "setfsuid",
        "setfsgid", "capget", "capset", "uname", "sysinfo", "getcpu", "rseq", "seccomp",
        "unshare", "setns", "ptrace",
    ),
    "ioctl": ("ioctl",),
}

_CATEGORY: dict[str, str] = {name: cat for cat, names in _BY_CATEGORY.items() for name in names}

SYSCALL_NAMES: tuple[str, ...] = tuple(sorted(set(X86_64.values()))) + (UNKNOWN,)
"""Every syscall name a row may carry, in a stable order (the column order of trace files)."""


def name_of(nr: int) -> str:
    """The name of syscall number `nr` on x86_64, or UNKNOWN."""
    return X86_64.get(nr, UNKNOWN)


def category_of(name: str) -> str:
    """The category a syscall name counts toward ('other' when it has none)."""
    return _CATEGORY.get(name, "other")
