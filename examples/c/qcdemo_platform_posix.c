/*
 * qcdemo_platform_posix.c — qcdemo_platform.h for Linux and macOS (POSIX).
 * Compiles to nothing on Windows.
 */
#ifndef _WIN32

/* dladdr (qcd_module_dir): glibc wants _GNU_SOURCE, macOS _DARWIN_C_SOURCE. */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE
#include "qcdemo_common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void qcd_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
}

/* ---- locks */

void qcd_mutex_init(qcd_mutex *m) { pthread_mutex_init(m, NULL); }
void qcd_mutex_destroy(qcd_mutex *m) { pthread_mutex_destroy(m); }
void qcd_mutex_lock(qcd_mutex *m) { pthread_mutex_lock(m); }
void qcd_mutex_unlock(qcd_mutex *m) { pthread_mutex_unlock(m); }
void qcd_cond_init(qcd_cond *c) { pthread_cond_init(c, NULL); }
void qcd_cond_destroy(qcd_cond *c) { pthread_cond_destroy(c); }
void qcd_cond_wait(qcd_cond *c, qcd_mutex *m) { pthread_cond_wait(c, m); }
void qcd_cond_signal(qcd_cond *c) { pthread_cond_signal(c); }

/* ---- stop signals */

volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP};

/*
 * Block the stop signals in this thread (and so in every thread created
 * later) and install a handler without SA_RESTART. *wait_mask receives the
 * mask to use while waiting for input: the old mask minus the stop signals.
 */
void qcd_setup_signals(qcd_sigmask *wait_mask)
{
    struct sigaction sa;
    sigset_t block;
    size_t i;

    sigemptyset(&block);
    for (i = 0; i < COUNT_OF(stop_signals); i++)
        sigaddset(&block, stop_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, wait_mask);
    for (i = 0; i < COUNT_OF(stop_signals); i++)
        sigdelset(wait_mask, stop_signals[i]);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: interrupt pselect() */
    for (i = 0; i < COUNT_OF(stop_signals); i++)
        sigaction(stop_signals[i], &sa, NULL);

    /* A closed stdout must not kill us before the lock file is removed. */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

/* ---- stdin: pselect() with the stop signals unblocked, then read() */

long qcd_read_stdin(const qcd_sigmask *wait_mask, char *buf, size_t n)
{
    fd_set rfds;
    ssize_t got;

    FD_ZERO(&rfds);
    FD_SET(STDIN_FILENO, &rfds);
    if (pselect(STDIN_FILENO + 1, &rfds, NULL, NULL, NULL, wait_mask) < 0) {
        if (errno == EINTR)
            return QCD_READ_AGAIN; /* a signal: the caller decides */
        emit_error("stdin: select: %s", strerror(errno));
        return QCD_READ_ERROR;
    }
    got = read(STDIN_FILENO, buf, n);
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN)
            return QCD_READ_AGAIN;
        emit_error("stdin: read: %s", strerror(errno));
        return QCD_READ_ERROR;
    }
    return (long)got;
}

/* ---- wake-up: a non-blocking pipe */

int qcd_wake_open(qcd_wake *w)
{
    int i;

    if (pipe(w->fd) != 0) {
        w->fd[0] = w->fd[1] = -1;
        return errno;
    }
    for (i = 0; i < 2; i++) {
        fcntl(w->fd[i], F_SETFD, FD_CLOEXEC);
        fcntl(w->fd[i], F_SETFL, fcntl(w->fd[i], F_GETFL) | O_NONBLOCK);
    }
    return 0;
}

void qcd_wake_signal(qcd_wake *w)
{
    if (write(w->fd[1], "x", 1) < 0) {
        /* the pipe is full: the waiting thread is being woken anyway */
    }
}

void qcd_wake_wait(qcd_wake *w, double seconds, const qcd_sigmask *wait_mask)
{
    struct timespec left;
    fd_set rfds;
    char buf[64];

    if (seconds < 0)
        seconds = 0;
    left.tv_sec = (time_t)seconds;
    left.tv_nsec = (long)((seconds - (double)left.tv_sec) * 1e9);
    if (left.tv_nsec >= 1000000000L)
        left.tv_nsec = 999999999L;
    FD_ZERO(&rfds);
    FD_SET(w->fd[0], &rfds);
    if (pselect(w->fd[0] + 1, &rfds, NULL, NULL, &left, wait_mask) > 0)
        while (read(w->fd[0], buf, sizeof buf) > 0) {
        }
}

void qcd_wake_close(qcd_wake *w)
{
    if (w->fd[0] >= 0)
        close(w->fd[0]);
    if (w->fd[1] >= 0)
        close(w->fd[1]);
    w->fd[0] = w->fd[1] = -1;
}

/* ---- clocks */

double qcd_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

double qcd_monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- processes: posix_spawn /bin/sh -c COMMAND */

/* Whether the environment entry e ("NAME=...") sets one of set_env's names. */
static int env_replaced(const char *e, const char *const *set_env, size_t nset)
{
    size_t i;
    for (i = 0; i < nset; i++) {
        const char *eq = strchr(set_env[i], '=');
        size_t len = eq != NULL ? (size_t)(eq - set_env[i]) + 1 : strlen(set_env[i]);
        if (strncmp(e, set_env[i], len) == 0)
            return 1;
    }
    return 0;
}

int qcd_run_shell(const char *command, const char *const *set_env, size_t nset, const qcd_sigmask *wait_mask,
                  int *code, char *err, size_t errlen)
{
    char **envp;
    char *child_argv[4];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t dflt;
    size_t n = 0, i, k = 0;
    pid_t pid;
    int rc, status = 0;

    while (environ[n] != NULL)
        n++;
    envp = xrealloc(NULL, (n + nset + 1) * sizeof *envp);
    for (i = 0; i < n; i++)
        if (!env_replaced(environ[i], set_env, nset))
            envp[k++] = environ[i];
    for (i = 0; i < nset; i++)
        envp[k++] = (char *)set_env[i];
    envp[k] = NULL;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    posix_spawnattr_init(&attr);
    /* The child starts with the signals we block unblocked and SIGPIPE at its default. */
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    for (i = 0; i < COUNT_OF(stop_signals); i++)
        sigaddset(&dflt, stop_signals[i]);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setsigmask(&attr, wait_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    child_argv[0] = "sh";
    child_argv[1] = "-c";
    child_argv[2] = (char *)command;
    child_argv[3] = NULL;
    rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, child_argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start /bin/sh: %s", strerror(rc));
        return QCD_RUN_FAILED;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "waitpid: %s", strerror(errno));
            return QCD_RUN_FAILED;
        }
    }
    if (WIFEXITED(status)) {
        *code = WEXITSTATUS(status);
        return QCD_RUN_EXITED;
    }
    *code = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return QCD_RUN_SIGNALED;
}

/* ---- files */

FILE *qcd_fopen(const char *path, const char *mode) { return fopen(path, mode); }

int qcd_getcwd(char *buf, size_t n) { return getcwd(buf, n) != NULL; }

int qcd_realpath(const char *path, char *buf, size_t n)
{
    char *r = realpath(path, NULL);
    size_t len;

    if (r == NULL)
        return 0;
    len = strlen(r);
    if (len >= n) {
        free(r);
        return 0;
    }
    memcpy(buf, r, len + 1);
    free(r);
    return 1;
}

int qcd_path_is_absolute(const char *s, size_t n) { return n > 0 && s[0] == '/'; }

int qcd_is_dir_sep(char c) { return c == '/'; }

int qcd_is_executable(const char *path) { return access(path, X_OK) == 0; }

char *qcd_module_dir(const void *addr)
{
    Dl_info info;
    const char *slash;

    if (dladdr(addr, &info) == 0 || info.dli_fname == NULL)
        return NULL;
    slash = strrchr(info.dli_fname, '/');
    if (slash == NULL)
        return NULL;
    return xmemdup(info.dli_fname, (size_t)(slash - info.dli_fname));
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int qcd_platform_posix_unused;
#endif /* _WIN32 */
