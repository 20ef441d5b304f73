#define _GNU_SOURCE
#include "cogd_crash_mark.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile sig_atomic_t cogd_crash_mark_fd = -1;
static volatile int64_t cogd_crash_mark_offset = 0;
#define COGD_CRASH_MARK_SIGNALS 6
static const int cogd_crash_mark_signals[COGD_CRASH_MARK_SIGNALS] = {SIGSEGV, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE};
/// What each signal did before `cogd_crash_mark_arm` (the Swift runtime's
/// backtracer, when it is on), run after the mark.
static struct sigaction cogd_crash_mark_previous[COGD_CRASH_MARK_SIGNALS];
static volatile sig_atomic_t cogd_crash_mark_installed = 0;
static volatile sig_atomic_t cogd_crash_courier_wake = -1;
static volatile sig_atomic_t cogd_crash_courier_done = -1;
static volatile sig_atomic_t cogd_crash_courier_wait_ms = 0;

/// The lowest address of the calling thread's stack, once it has an
/// alternate signal stack from `cogd_crash_mark_alternate_stack` (else 0).
static __thread uintptr_t cogd_crash_mark_stack_low = 0;

/// How far below its stack's lowest address a fault still counts as the
/// thread overflowing its stack (a frame larger than the guard page faults
/// that far down).
#define COGD_CRASH_MARK_OVERFLOW_REACH ((uintptr_t)1 << 20)

/// Whether `info` is a SIGSEGV at the end of the calling thread's stack.
static int cogd_crash_mark_is_overflow(int signal_number, const siginfo_t *info) {
    uintptr_t low = cogd_crash_mark_stack_low;
    if (signal_number != SIGSEGV || info == NULL || low == 0) return 0;
    uintptr_t address = (uintptr_t)info->si_addr;
    uintptr_t reach = low > COGD_CRASH_MARK_OVERFLOW_REACH ? low - COGD_CRASH_MARK_OVERFLOW_REACH : 0;
    return address >= reach && address < low + 4096;
}

/// Async-signal-safe calls only: getpid, pwrite, write, poll, sigaction,
/// sigprocmask, raise (and the previous handler, which must be so itself).
static void cogd_crash_mark_handler(int signal_number, siginfo_t *info, void *context) {
    int saved = errno;
    int overflow = cogd_crash_mark_is_overflow(signal_number, info);
    int fd = cogd_crash_mark_fd;
    // si_code > 0: the kernel raised it for a fault of this process (ILL_ILLOPN, SEGV_MAPERR …);
    // si_pid == getpid(): the process sent it to itself (abort(), raise()). Else another process did (kill).
    int own = info != NULL && (info->si_code > 0 || info->si_pid == getpid());
    if (fd >= 0 && own) {
        unsigned char mark = (unsigned char)signal_number;
        ssize_t written;
        do {
            written = pwrite(fd, &mark, 1, (off_t)cogd_crash_mark_offset);
        } while (written < 0 && errno == EINTR);
        // The courier tells the standbys which request crashed before the process dies of it.
        int wake = cogd_crash_courier_wake;
        int done = cogd_crash_courier_done;
        if (wake >= 0 && done >= 0) {
            do {
                written = write(wake, &mark, 1);
            } while (written < 0 && errno == EINTR);
            if (written == 1) {
                struct pollfd answer = {.fd = done, .events = POLLIN, .revents = 0};
                (void)poll(&answer, 1, cogd_crash_courier_wait_ms);
            }
        }
    }
    // The handler that was there before (the Swift runtime's backtracer
    // prints where it crashed), with the fault's own siginfo and context.
    // Not after a stack overflow: the backtracer then walks every frame of
    // the overflowed stack, and its helper process outlives this one,
    // holding its descriptors (Swift 6.3 on Linux); one line says what happened.
    if (overflow) {
        static const char line[] = "cogd: the serving thread overflowed its stack (SIGSEGV at its end); no backtrace\n";
        ssize_t ignored = write(STDERR_FILENO, line, sizeof line - 1);
        (void)ignored;
    }
    for (int index = 0; index < COGD_CRASH_MARK_SIGNALS; index++) {
        if (cogd_crash_mark_signals[index] != signal_number || overflow) continue;
        struct sigaction previous = cogd_crash_mark_previous[index];
        sigaction(signal_number, &previous, NULL);
        if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != NULL) {
            previous.sa_sigaction(signal_number, info, context);
        } else if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
            previous.sa_handler(signal_number);
        }
    }
    // Then the default action: the process dies of the signal.
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal_number, &fallback, NULL);
    sigset_t unblocked;
    sigemptyset(&unblocked);
    sigaddset(&unblocked, signal_number);
    sigprocmask(SIG_UNBLOCK, &unblocked, NULL);
    raise(signal_number);
    // Not reached for these signals; a fault returned to re-runs its
    // instruction under the default action.
    errno = saved;
}

int cogd_crash_mark_arm(int fd, int64_t offset) {
    cogd_crash_mark_fd = -1;
    cogd_crash_mark_offset = offset;
    cogd_crash_mark_fd = fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = cogd_crash_mark_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    if (cogd_crash_mark_installed) return 0;  // armed again (another leader in this process): the handlers stay
    for (int index = 0; index < COGD_CRASH_MARK_SIGNALS; index++) {
        if (sigaction(cogd_crash_mark_signals[index], NULL, &cogd_crash_mark_previous[index]) != 0) return errno;
    }
    for (int index = 0; index < COGD_CRASH_MARK_SIGNALS; index++) {
        if (sigaction(cogd_crash_mark_signals[index], &action, NULL) != 0) return errno;
    }
    cogd_crash_mark_installed = 1;
    return 0;
}

void cogd_crash_mark_disarm(int fd) {
    if (cogd_crash_mark_fd == fd) cogd_crash_mark_fd = -1;
}

void cogd_crash_mark_courier(int wake_fd, int done_fd, int wait_ms) {
    cogd_crash_courier_wake = -1;
    cogd_crash_courier_done = done_fd;
    cogd_crash_courier_wait_ms = wait_ms;
    cogd_crash_courier_wake = wake_fd;
}

void cogd_crash_mark_courier_release(int wake_fd) {
    if (cogd_crash_courier_wake == wake_fd) cogd_crash_mark_courier(-1, -1, 0);
}

void *cogd_crash_mark_alternate_stack(size_t size) {
    stack_t current;
    if (sigaltstack(NULL, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return NULL;  // one is there already
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return NULL;
    // A guard page below the stack: a handler that overran it faults instead of writing over other memory.
    unsigned char *memory = mmap(NULL, size + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (memory == MAP_FAILED) return NULL;
    if (mprotect(memory, (size_t)page, PROT_NONE) != 0) {
        munmap(memory, size + (size_t)page);
        return NULL;
    }
    stack_t stack = {.ss_sp = memory + page, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) {
        munmap(memory, size + (size_t)page);
        return NULL;
    }
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
        void *low = NULL;
        size_t length = 0;
        if (pthread_attr_getstack(&attributes, &low, &length) == 0) cogd_crash_mark_stack_low = (uintptr_t)low;
        pthread_attr_destroy(&attributes);
    }
    return memory;
}

void cogd_crash_mark_alternate_stack_release(void *memory, size_t size) {
    if (memory == NULL) return;
    long page = sysconf(_SC_PAGESIZE);
    stack_t current;
    if (page <= 0 || sigaltstack(NULL, &current) != 0) return;
    if (current.ss_sp != (unsigned char *)memory + page || (current.ss_flags & SS_ONSTACK)) return;
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    if (sigaltstack(&off, NULL) == 0) munmap(memory, size + (size_t)page);
    cogd_crash_mark_stack_low = 0;
}
