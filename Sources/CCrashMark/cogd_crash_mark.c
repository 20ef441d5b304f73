#define _GNU_SOURCE
#include "cogd_crash_mark.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
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

/// Async-signal-safe calls only: getpid, pwrite, write, poll, sigaction,
/// sigprocmask, raise (and the previous handler, which must be so itself).
static void cogd_crash_mark_handler(int signal_number, siginfo_t *info, void *context) {
    int saved = errno;
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
    for (int index = 0; index < COGD_CRASH_MARK_SIGNALS; index++) {
        if (cogd_crash_mark_signals[index] != signal_number) continue;
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
