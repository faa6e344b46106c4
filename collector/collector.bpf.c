// procsift collector: per-process syscall counts and per-task run/wait accounting.
//
// Loaded by collector/_bpf.py with bcc. Configured by -D flags, never by string
// replacement:
//   SC_ENTRIES, TASK_ENTRIES   map sizes
//   FILTER_TRACKED            count only tasks in the `tracked` set (and their
//                             descendants, added at fork)
//   RAW_SYS_ENTER             attach sys_enter as a raw tracepoint (~8 ns/event)
//                             instead of the classic one (~40 ns)
//   SOCK_TRACEPOINTS          the kernel has sock:sock_{send,recv}_length (6.3+):
//                             count socket traffic per process
//   KERNEL_TIMES              with TASK_EXEC_OFF, TASK_DELAY_OFF, TASK_PCOUNT_OFF (byte
//                             offsets in task_struct, read from the running kernel's BTF
//                             by collector/_btf.py): take run time, run-queue wait and
//                             dispatches at each switch-out from the kernel's own per-task
//                             counters (what /proc/PID/schedstat shows)
//   RAW_WAKEUP                with TASK_PID_OFF: attach sched_wakeup(_new) as raw
//                             tracepoints, which a BPF program running on the same CPU
//                             (another tracepoint's, in process context, when the wake-up
//                             comes from an interrupt) does not make the kernel skip
//
// The scheduler probes are classic tracepoints on purpose: their raw forms hand
// over `struct task_struct *`, whose layout bcc would take from the installed
// headers (Debian 6.1 here) while the running kernel is newer; the classic
// tracepoints' fields come from tracefs' format files and are always right.

#include <uapi/linux/ptrace.h>

// Our own view of a task's state.
#define ST_UNKNOWN  0
#define ST_RUNNING  1
#define ST_RUNNABLE 2
#define ST_SLEEP    3  // S: interruptible wait
#define ST_BLOCK    4  // D: uninterruptible wait
#define ST_DEAD     5  // switched out for the last time: no more time accrues

// sched_switch reports prev_state as TASK_REPORT bits; a preempted task is
// reported as TASK_REPORT_MAX (0x100 since 5.x), which is "still runnable".
#define REPORT_INTERRUPTIBLE   0x01
#define REPORT_UNINTERRUPTIBLE 0x02
#define REPORT_MAX             0x100

struct sc_key {
    u32 tgid;
    u32 nr;
};

// Cumulative per-task figures; user space diffs them once per window.
struct task_stats {
    u64 ts;            // ktime when `state` began
    u64 run_ns;
    u64 runq_ns;
    u64 sleep_ns;
    u64 block_ns;
    u64 switches_in;
    u64 voluntary;
    u64 involuntary;
    u64 transitions;   // run <-> wait changes, both directions
    u64 wakeups;       // times this task was woken
    u64 wakes_others;  // times this task woke another task
    u64 start_ns;      // boot-clock ns at fork; 0 if it predates the collector
    u64 max_wait[2];   // longest wait ending in window seq (slot seq & 1)
    u32 max_seq[2];
    u32 tgid;          // 0 until the task has been seen running
    u32 ppid;          // parent tgid, when seen at fork
    u32 state;
    u32 exited;
    u32 uid;           // filled at exit, with comm, for processes /proc never showed
    u32 k_seen;        // k_* hold the kernel's counters as of the last switch-out
    u64 k_exec;        // se.sum_exec_runtime
    u64 k_delay;       // sched_info.run_delay
    u64 k_pcount;      // sched_info.pcount
    u64 ev_runq;       // queue time credited by switch-in events since the last switch-out
    u64 ev_sw;         // switch-ins seen since the last switch-out
    char comm[16];
};

// Socket traffic per process, from the sock:sock_{send,recv}_length tracepoints, which
// fire in the caller's context for every socket send or receive, whatever the syscall
// (read/write, sendto, recvmsg, sendfile's splice...). IPv4/IPv6 counted apart from
// AF_UNIX; other families (netlink...) not at all. Drained (read and deleted) per window.
#define AF_UNIX_  1
#define AF_INET_  2
#define AF_INET6_ 10

struct sock_io {
    u64 net_tx;        // calls, errors (EAGAIN...) included
    u64 net_tx_bytes;
    u64 net_rx;
    u64 net_rx_bytes;
    u64 unix_calls;    // AF_UNIX sends and receives
};

BPF_PERCPU_HASH(syscounts, struct sc_key, u64, SC_ENTRIES);
BPF_PERCPU_HASH(sockio, u32, struct sock_io, TASK_ENTRIES);
BPF_HASH(tasks, u32, struct task_stats, TASK_ENTRIES);
BPF_ARRAY(window_seq, u32, 1);
BPF_PERCPU_ARRAY(dropped, u64, 1);  // map-full events, reported as collector drops

#ifdef FILTER_TRACKED
BPF_HASH(tracked, u32, u8, TASK_ENTRIES);
static __always_inline int is_tracked(u32 tid) { return tracked.lookup(&tid) != 0; }
#else
static __always_inline int is_tracked(u32 tid) { return 1; }
#endif

static __always_inline void count_drop(void) {
    int zero = 0;
    u64 *d = dropped.lookup(&zero);
    if (d)
        (*d)++;
}

static __always_inline struct task_stats *task_of(u32 tid, u64 now) {
    struct task_stats *t = tasks.lookup(&tid);
    if (t)
        return t;
    struct task_stats fresh = {};
    fresh.ts = now;
    t = tasks.lookup_or_try_init(&tid, &fresh);
    if (!t)
        count_drop();
    return t;
}

static __always_inline void note_wait(struct task_stats *t, u64 wait) {
    int zero = 0;
    u32 *seqp = window_seq.lookup(&zero);
    u32 seq = seqp ? *seqp : 0;
    u32 slot = seq & 1;
    if (t->max_seq[slot] != seq) {
        t->max_seq[slot] = seq;
        t->max_wait[slot] = 0;
    }
    if (wait > t->max_wait[slot])
        t->max_wait[slot] = wait;
}

#ifdef RAW_SYS_ENTER
RAW_TRACEPOINT_PROBE(sys_enter)
{
    // TP_PROTO(struct pt_regs *regs, long id)
    u64 nr = ctx->args[1];
#else
TRACEPOINT_PROBE(raw_syscalls, sys_enter)
{
    u64 nr = args->id;
#endif
    u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_tracked((u32)pid_tgid))
        return 0;
    struct sc_key key = {.tgid = pid_tgid >> 32, .nr = (u32)nr};
    u64 zero = 0;
    // bcc 0.26: .increment() on a per-CPU hash silently inserts nothing.
    u64 *val = syscounts.lookup_or_try_init(&key, &zero);
    if (val)
        (*val)++;
    else
        count_drop();
    return 0;
}

#ifdef SOCK_TRACEPOINTS
static __always_inline int on_sock(u16 family, int ret, int send)
{
    if (family != AF_INET_ && family != AF_INET6_ && family != AF_UNIX_)
        return 0;
    u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_tracked((u32)pid_tgid))
        return 0;
    u32 tgid = pid_tgid >> 32;
    struct sock_io zero = {};
    struct sock_io *io = sockio.lookup_or_try_init(&tgid, &zero);
    if (!io) {
        count_drop();
        return 0;
    }
    if (family == AF_UNIX_) {
        io->unix_calls++;
    } else if (send) {
        io->net_tx++;
        if (ret > 0)
            io->net_tx_bytes += ret;
    } else {
        io->net_rx++;
        if (ret > 0)
            io->net_rx_bytes += ret;
    }
    return 0;
}

TRACEPOINT_PROBE(sock, sock_send_length)
{
    return on_sock(args->family, args->ret, 1);
}

TRACEPOINT_PROBE(sock, sock_recv_length)
{
    return on_sock(args->family, args->ret, 0);
}
#endif

#ifdef KERNEL_TIMES
// The kernel can put a task on a CPU without a sched_switch event for it: seen on this
// project's VMs (6.18), where the kernel counted more dispatches than sched_switch showed,
// and the event-based accounting lost the whole slice that followed (up to ~0.4 s of a CPU
// loop). At every switch-out the task is `current`, so its own counters can be read; the
// run time, queue wait and dispatches since its previous switch-out come from them.
static __always_inline void take_kernel_times(struct task_stats *t, u64 *run)
{
    u64 task = bpf_get_current_task();
    u64 exec = 0, delay = 0, pcount = 0;
    if (bpf_probe_read_kernel(&exec, sizeof(exec), (void *)(task + TASK_EXEC_OFF)) ||
        bpf_probe_read_kernel(&delay, sizeof(delay), (void *)(task + TASK_DELAY_OFF)) ||
        bpf_probe_read_kernel(&pcount, sizeof(pcount), (void *)(task + TASK_PCOUNT_OFF)))
        return;  // keep the event-based figures
    if (t->k_seen) {
        *run = exec > t->k_exec ? exec - t->k_exec : 0;
        u64 q = delay > t->k_delay ? delay - t->k_delay : 0;
        if (q > t->ev_runq)
            t->runq_ns += q - t->ev_runq;
        u64 n = pcount > t->k_pcount ? pcount - t->k_pcount : 0;
        if (n > t->ev_sw)
            t->switches_in += n - t->ev_sw;
    }
    t->k_exec = exec;
    t->k_delay = delay;
    t->k_pcount = pcount;
    t->k_seen = 1;
    t->ev_runq = 0;
    t->ev_sw = 0;
}
#endif

TRACEPOINT_PROBE(sched, sched_switch)
{
    u64 now = bpf_ktime_get_ns();
    u32 prev = args->prev_pid;
    u32 next = args->next_pid;
    long pstate = args->prev_state;

    if (prev != 0 && is_tracked(prev)) {
        struct task_stats *t = task_of(prev, now);
        if (t) {
            // The tracepoint runs in prev's context: current is prev.
            t->tgid = bpf_get_current_pid_tgid() >> 32;
            u64 run = t->state == ST_RUNNING ? now - t->ts : 0;
#ifdef KERNEL_TIMES
            take_kernel_times(t, &run);
#endif
            t->run_ns += run;
            if (t->exited) {
                // The last switch of an exiting task (sched_process_exit came first): it
                // reports a zombie/dead state, which is not a wait, and nothing follows it.
                t->state = ST_DEAD;
            } else if (pstate == 0 || (pstate & REPORT_MAX)) {
                t->involuntary++;
                t->state = ST_RUNNABLE;
            } else {
                t->voluntary++;
                t->transitions++;
                t->state = (pstate & REPORT_UNINTERRUPTIBLE) ? ST_BLOCK : ST_SLEEP;
            }
            t->ts = now;
        }
    }
    if (next != 0 && is_tracked(next)) {
        struct task_stats *t = task_of(next, now);
        if (t) {
            if (t->state == ST_RUNNABLE) {
                t->runq_ns += now - t->ts;
                t->ev_runq += now - t->ts;
            } else if (t->state == ST_SLEEP || t->state == ST_BLOCK) {
                // Its wake-up went unseen (the kernel skips a tracepoint program while another
                // BPF program runs on that CPU): the wait ended by now at the latest. Its queue
                // part is in it, so the kernel's queue figure is not credited for this slice.
                u64 wait = now - t->ts;
                if (t->state == ST_SLEEP)
                    t->sleep_ns += wait;
                else
                    t->block_ns += wait;
                note_wait(t, wait);
                t->transitions++;
                t->ev_runq = 1ULL << 62;  // "all of it was credited" (fits int64 in user space)
            }
            t->switches_in++;
            t->ev_sw++;
            t->state = ST_RUNNING;
            t->ts = now;
        }
    }
    return 0;
}

static __always_inline int on_wakeup(u32 tid)
{
    if (tid == 0 || !is_tracked(tid))
        return 0;
    u64 now = bpf_ktime_get_ns();
    struct task_stats *t = task_of(tid, now);
    if (t) {
        t->wakeups++;
        // A task can be woken while still on its CPU (it set its state but had not
        // switched out yet), or while already queued: its run or queue time goes on.
        if (t->state != ST_RUNNING && t->state != ST_RUNNABLE) {
            if (t->state == ST_SLEEP || t->state == ST_BLOCK) {
                u64 wait = now - t->ts;
                if (t->state == ST_SLEEP)
                    t->sleep_ns += wait;
                else
                    t->block_ns += wait;
                note_wait(t, wait);
                t->transitions++;
            }
            t->state = ST_RUNNABLE;
            t->ts = now;
        }
    }
    u32 waker = (u32)bpf_get_current_pid_tgid();
    if (waker != 0 && waker != tid && is_tracked(waker)) {
        struct task_stats *w = task_of(waker, now);
        if (w)
            w->wakes_others++;
    }
    return 0;
}

#ifdef RAW_WAKEUP
static __always_inline u32 pid_of(u64 task)
{
    u32 pid = 0;
    bpf_probe_read_kernel(&pid, sizeof(pid), (void *)(task + TASK_PID_OFF));
    return pid;
}

RAW_TRACEPOINT_PROBE(sched_wakeup)
{
    // TP_PROTO(struct task_struct *p)
    return on_wakeup(pid_of(ctx->args[0]));
}

RAW_TRACEPOINT_PROBE(sched_wakeup_new)
{
    return on_wakeup(pid_of(ctx->args[0]));
}
#else
TRACEPOINT_PROBE(sched, sched_wakeup)
{
    return on_wakeup(args->pid);
}

TRACEPOINT_PROBE(sched, sched_wakeup_new)
{
    return on_wakeup(args->pid);
}
#endif

TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u32 parent = args->parent_pid;
    u32 child = args->child_pid;
#ifdef FILTER_TRACKED
    if (!is_tracked(parent))
        return 0;
    u8 one = 1;
    tracked.update(&child, &one);
#endif
    u64 now = bpf_ktime_get_ns();
    // A new task under a reused PID starts from zero; start_ns tells user space
    // it is another process than the one it knew under that PID.
    struct task_stats fresh = {};
    fresh.ts = now;
    fresh.start_ns = bpf_ktime_get_boot_ns();
    fresh.ppid = bpf_get_current_pid_tgid() >> 32;
#ifdef KERNEL_TIMES
    // A new task's counters start at zero (sched_fork), so they are known from its birth.
    fresh.k_seen = 1;
#endif
    if (tasks.update(&child, &fresh) != 0)
        count_drop();
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u64 pid_tgid = bpf_get_current_pid_tgid();
    u32 tid = (u32)pid_tgid;
    if (!is_tracked(tid))
        return 0;
    struct task_stats *t = task_of(tid, bpf_ktime_get_ns());
    if (t) {
        t->tgid = pid_tgid >> 32;
        t->exited = 1;
        t->uid = (u32)bpf_get_current_uid_gid();
        bpf_get_current_comm(&t->comm, sizeof(t->comm));
    }
    return 0;
}
