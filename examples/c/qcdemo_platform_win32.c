/*
 * qcdemo_platform_win32.c — qcdemo_platform.h for Windows (mingw-w64 or
 * MSVC). Compiles to nothing elsewhere.
 *
 * Stop signals are the console control events; stdin is read by a thread of
 * its own so that the main thread can wait for input and for a stop event at
 * once (WaitForMultipleObjects), whatever stdin is (console, pipe or file).
 */
#ifdef _WIN32

#include "qcdemo_common.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <shellapi.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* ---- UTF-8 <-> UTF-16 */

/* s[0..n) (n < 0: up to its NUL) as a NUL-terminated UTF-16 string. */
static wchar_t *to_wide(const char *s, int n)
{
    int len = MultiByteToWideChar(CP_UTF8, 0, s, n, NULL, 0);
    wchar_t *w;

    if (len <= 0 && n != 0)
        return NULL;
    w = xrealloc(NULL, ((size_t)len + 1) * sizeof *w);
    if (len > 0)
        MultiByteToWideChar(CP_UTF8, 0, s, n, w, len);
    w[n < 0 && len > 0 ? len - 1 : len] = L'\0';
    return w;
}

/* w[0..n) (n < 0: up to its NUL) as a NUL-terminated UTF-8 string. */
static char *to_utf8(const wchar_t *w, int n)
{
    int len = WideCharToMultiByte(CP_UTF8, 0, w, n, NULL, 0, NULL, NULL);
    char *s;

    if (len < 0)
        len = 0;
    s = xrealloc(NULL, (size_t)len + 1);
    if (len > 0)
        WideCharToMultiByte(CP_UTF8, 0, w, n, s, len, NULL, NULL);
    s[n < 0 && len > 0 ? len - 1 : len] = '\0';
    return s;
}

/* The system's message for a Win32 error code, into buf. */
static const char *win_strerror(DWORD code, char *buf, size_t n)
{
    wchar_t wbuf[512];
    DWORD len = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, wbuf,
                               (DWORD)COUNT_OF(wbuf), NULL);
    char *s;

    while (len > 0 && (wbuf[len - 1] == L'\r' || wbuf[len - 1] == L'\n' || wbuf[len - 1] == L'.'))
        len--;
    if (len == 0) {
        snprintf(buf, n, "error %lu", (unsigned long)code);
        return buf;
    }
    s = to_utf8(wbuf, (int)len);
    snprintf(buf, n, "%s (error %lu)", s, (unsigned long)code);
    free(s);
    return buf;
}

/* ---- start-up */

void qcd_init(int *argc, char ***argv)
{
    int n = 0, i;
    wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &n);

    /* The UTF-8 arguments live as long as the process. */
    if (wargv != NULL && n > 0) {
        char **args = xrealloc(NULL, ((size_t)n + 1) * sizeof *args);
        for (i = 0; i < n; i++)
            args[i] = to_utf8(wargv[i], -1);
        args[n] = NULL;
        *argc = n;
        *argv = args;
    }
    if (wargv != NULL)
        LocalFree(wargv);
    /* JSON lines end in "\n", not "\r\n"; a console shows UTF-8. */
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
    SetConsoleOutputCP(CP_UTF8);
}

/* ---- locks: slim reader/writer locks (exclusive) and condition variables */

void qcd_mutex_init(qcd_mutex *m) { InitializeSRWLock(m); }
void qcd_mutex_destroy(qcd_mutex *m) { (void)m; }
void qcd_mutex_lock(qcd_mutex *m) { AcquireSRWLockExclusive(m); }
void qcd_mutex_unlock(qcd_mutex *m) { ReleaseSRWLockExclusive(m); }
void qcd_cond_init(qcd_cond *c) { InitializeConditionVariable(c); }
void qcd_cond_destroy(qcd_cond *c) { (void)c; }
void qcd_cond_wait(qcd_cond *c, qcd_mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
void qcd_cond_signal(qcd_cond *c) { WakeConditionVariable(c); }

/* ---- stop signals: console control events */

volatile sig_atomic_t stop_signal = 0;

/* Set (manual reset) once a stop signal arrived: it ends every wait. */
static HANDLE stop_event;

static HANDLE get_stop_event(void)
{
    if (stop_event == NULL)
        stop_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    return stop_event;
}

/* Runs on a thread the system creates for it. */
static BOOL WINAPI on_console_event(DWORD type)
{
    switch (type) {
    case CTRL_C_EVENT:
        stop_signal = SIGINT;
        break;
    case CTRL_BREAK_EVENT:
        stop_signal = SIGBREAK;
        break;
    default: /* the console closes, logoff, shutdown */
        stop_signal = SIGTERM;
        break;
    }
    SetEvent(stop_event);
    /* After these the process ends as soon as the handler returns: give the
     * main thread the time to clean up and exit (the system waits 5 s). */
    if (type == CTRL_CLOSE_EVENT || type == CTRL_LOGOFF_EVENT || type == CTRL_SHUTDOWN_EVENT)
        Sleep(10000);
    return TRUE;
}

void qcd_setup_signals(qcd_sigmask *wait_mask)
{
    *wait_mask = 0;
    get_stop_event();
    SetConsoleCtrlHandler(on_console_event, TRUE);
}

/* ---- stdin: a reader thread hands over one chunk at a time */

static struct {
    HANDLE in;
    HANDLE ready; /* auto reset: a chunk, EOF or an error is there */
    HANDLE want;  /* auto reset: the main thread wants the next chunk */
    int started, done;
    char buf[65536];
    DWORD len, off;
    int end; /* 1: EOF, 2: error (in `error`) */
    DWORD error;
} rd;

/* One read from a console: UTF-16 converted to UTF-8. Ctrl+Z at the start
 * of a line is EOF. Returns 0 on failure (GetLastError). */
static int read_console(DWORD *got)
{
    wchar_t w[8192]; /* at most 3 UTF-8 bytes each: fits rd.buf */
    DWORD nw = 0;
    int n;

    if (!ReadConsoleW(rd.in, w, (DWORD)COUNT_OF(w), &nw, NULL))
        return 0;
    if (nw > 0 && w[0] == 0x1A)
        nw = 0;
    n = nw > 0 ? WideCharToMultiByte(CP_UTF8, 0, w, (int)nw, rd.buf, (int)sizeof rd.buf, NULL, NULL) : 0;
    *got = n > 0 ? (DWORD)n : 0;
    return 1;
}

static DWORD WINAPI stdin_reader(LPVOID unused)
{
    DWORD mode;
    int console = GetConsoleMode(rd.in, &mode) != 0;

    (void)unused;
    for (;;) {
        DWORD got = 0;
        int ok;

        WaitForSingleObject(rd.want, INFINITE);
        for (;;) {
            ok = console ? read_console(&got) : ReadFile(rd.in, rd.buf, sizeof rd.buf, &got, NULL) != 0;
            /* Ctrl+C also ends a console read: that is no EOF. */
            if (console && (ok ? got == 0 : GetLastError() == ERROR_OPERATION_ABORTED) &&
                WaitForSingleObject(stop_event, 200) == WAIT_OBJECT_0)
                continue;
            if (!ok && GetLastError() == ERROR_OPERATION_ABORTED)
                continue;
            break;
        }
        rd.len = ok ? got : 0;
        rd.off = 0;
        if (!ok) {
            rd.error = GetLastError();
            rd.end = rd.error == ERROR_BROKEN_PIPE || rd.error == ERROR_HANDLE_EOF ? 1 : 2;
        } else if (got == 0) {
            rd.end = 1;
        }
        SetEvent(rd.ready);
        if (rd.end)
            return 0;
    }
}

long qcd_read_stdin(const qcd_sigmask *wait_mask, char *buf, size_t n)
{
    HANDLE waits[2];
    DWORD r;

    (void)wait_mask;
    if (rd.done)
        return QCD_READ_EOF;
    if (!rd.started) {
        HANDLE t;
        rd.started = 1;
        rd.in = GetStdHandle(STD_INPUT_HANDLE);
        if (rd.in == NULL || rd.in == INVALID_HANDLE_VALUE) {
            rd.done = 1;
            return QCD_READ_EOF;
        }
        rd.ready = CreateEventW(NULL, FALSE, FALSE, NULL);
        rd.want = CreateEventW(NULL, FALSE, TRUE, NULL);
        t = rd.ready != NULL && rd.want != NULL && get_stop_event() != NULL
                ? CreateThread(NULL, 0, stdin_reader, NULL, 0, NULL)
                : NULL;
        if (t == NULL) {
            char msg[256];
            rd.done = 1;
            emit_error("stdin: cannot start the reader: %s", win_strerror(GetLastError(), msg, sizeof msg));
            return QCD_READ_ERROR;
        }
        CloseHandle(t); /* it ends at EOF, or with the process */
    }
    waits[0] = rd.ready;
    waits[1] = stop_event;
    r = WaitForMultipleObjects(2, waits, FALSE, INFINITE);
    if (r == WAIT_OBJECT_0 + 1)
        return QCD_READ_AGAIN;
    if (r != WAIT_OBJECT_0) {
        char msg[256];
        emit_error("stdin: wait: %s", win_strerror(GetLastError(), msg, sizeof msg));
        return QCD_READ_ERROR;
    }
    if (rd.off < rd.len) {
        size_t k = rd.len - rd.off < n ? rd.len - rd.off : n;
        memcpy(buf, rd.buf + rd.off, k);
        rd.off += (DWORD)k;
        SetEvent(rd.off < rd.len ? rd.ready : rd.want);
        return (long)k;
    }
    rd.done = 1;
    if (rd.end == 2) {
        char msg[256];
        emit_error("stdin: read: %s", win_strerror(rd.error, msg, sizeof msg));
        return QCD_READ_ERROR;
    }
    return QCD_READ_EOF;
}

/* ---- wake-up: an auto-reset event */

int qcd_wake_open(qcd_wake *w)
{
    w->event = CreateEventW(NULL, FALSE, FALSE, NULL);
    return w->event != NULL ? 0 : ENOMEM;
}

void qcd_wake_signal(qcd_wake *w) { SetEvent(w->event); }

void qcd_wake_wait(qcd_wake *w, double seconds, const qcd_sigmask *wait_mask)
{
    HANDLE waits[2];
    double ms = seconds * 1000.0;

    (void)wait_mask;
    waits[0] = w->event;
    waits[1] = get_stop_event();
    if (ms < 0)
        ms = 0;
    if (ms > 86400000.0)
        ms = 86400000.0;
    WaitForMultipleObjects(waits[1] != NULL ? 2 : 1, waits, FALSE, (DWORD)(ms + 0.999));
}

void qcd_wake_close(qcd_wake *w)
{
    if (w->event != NULL)
        CloseHandle(w->event);
    w->event = NULL;
}

/* ---- clocks */

double qcd_realtime_ms(void)
{
    FILETIME ft;
    ULARGE_INTEGER t;

    GetSystemTimeAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    /* 100 ns units since 1601-01-01 */
    return (double)(t.QuadPart - 116444736000000000ULL) / 10000.0;
}

double qcd_monotonic_s(void)
{
    LARGE_INTEGER f, c;

    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart / (double)f.QuadPart;
}

/* ---- processes: cmd.exe /d /s /c "COMMAND" */

/* The length of the name of environment entry e ("NAME=VALUE"; a leading
 * '=' belongs to the name, as in "=C:=C:\\"). */
static int env_name_len(const wchar_t *e)
{
    const wchar_t *eq = wcschr(e + 1, L'=');
    return eq != NULL ? (int)(eq - e) : (int)wcslen(e);
}

/* Windows wants the block sorted by name, ignoring case. */
static int env_cmp(const void *a, const void *b)
{
    const wchar_t *x = *(const wchar_t *const *)a, *y = *(const wchar_t *const *)b;
    int r = CompareStringOrdinal(x, env_name_len(x), y, env_name_len(y), TRUE);
    return r == CSTR_LESS_THAN ? -1 : r == CSTR_GREATER_THAN ? 1 : 0;
}

/* Our environment with set_env's entries in place of those of the same
 * name, as a sorted UTF-16 environment block. NULL on failure. */
static wchar_t *env_block(const char *const *set_env, size_t nset)
{
    wchar_t *ours = GetEnvironmentStringsW(), *p, *block, *q;
    wchar_t **entries = NULL, **mine;
    size_t n = 0, i, j, total = 1;

    if (ours == NULL)
        return NULL;
    mine = xrealloc(NULL, (nset + 1) * sizeof *mine);
    for (i = 0; i < nset; i++)
        mine[i] = to_wide(set_env[i], -1);
    for (p = ours; *p != L'\0'; p += wcslen(p) + 1) {
        int keep = 1;
        for (i = 0; i < nset && keep; i++)
            keep = mine[i] == NULL || CompareStringOrdinal(p, env_name_len(p), mine[i], env_name_len(mine[i]),
                                                           TRUE) != CSTR_EQUAL;
        if (keep) {
            entries = xrealloc(entries, (n + 1) * sizeof *entries);
            entries[n++] = p;
        }
    }
    for (i = 0; i < nset; i++) {
        if (mine[i] == NULL)
            continue;
        entries = xrealloc(entries, (n + 1) * sizeof *entries);
        entries[n++] = mine[i];
    }
    qsort(entries, n, sizeof *entries, env_cmp);
    for (i = 0; i < n; i++)
        total += wcslen(entries[i]) + 1;
    block = q = xrealloc(NULL, total * sizeof *block);
    for (i = 0; i < n; i++) {
        j = wcslen(entries[i]) + 1;
        memcpy(q, entries[i], j * sizeof *q);
        q += j;
    }
    *q = L'\0';
    for (i = 0; i < nset; i++) {
        if (mine[i] != NULL)
            SecureZeroMemory(mine[i], wcslen(mine[i]) * sizeof(wchar_t));
        free(mine[i]);
    }
    free(mine);
    free(entries);
    FreeEnvironmentStringsW(ours);
    return block;
}

int qcd_run_shell(const char *command, const char *const *set_env, size_t nset, const qcd_sigmask *wait_mask,
                  int *code, char *err, size_t errlen)
{
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    const wchar_t *comspec = _wgetenv(L"ComSpec");
    wchar_t *wcmd = to_wide(command, -1), *line, *env;
    HANDLE nul, errh = NULL, ours = GetStdHandle(STD_ERROR_HANDLE);
    DWORD exit_code = 0;
    size_t cap;
    char msg[256];
    BOOL ok;

    (void)wait_mask;
    if (wcmd == NULL) {
        snprintf(err, errlen, "the command is not valid UTF-8");
        return QCD_RUN_FAILED;
    }
    if (comspec == NULL || comspec[0] == L'\0')
        comspec = L"cmd.exe";
    /* /s: cmd.exe takes what is between the outer quotes as it is. */
    cap = wcslen(comspec) + wcslen(wcmd) + 32;
    line = xrealloc(NULL, cap * sizeof *line);
    swprintf(line, cap, L"\"%ls\" /d /s /c \"%ls\"", comspec, wcmd);
    free(wcmd);
    env = env_block(set_env, nset);
    nul = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, NULL);
    if (ours != NULL && ours != INVALID_HANDLE_VALUE)
        DuplicateHandle(GetCurrentProcess(), ours, GetCurrentProcess(), &errh, 0, TRUE, DUPLICATE_SAME_ACCESS);
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = nul != INVALID_HANDLE_VALUE ? nul : NULL;
    si.hStdOutput = errh;
    si.hStdError = errh;
    ok = env != NULL && CreateProcessW(NULL, line, NULL, NULL, TRUE, CREATE_UNICODE_ENVIRONMENT, env, NULL, &si, &pi);
    if (!ok)
        snprintf(err, errlen, "cannot start cmd.exe: %s", env == NULL ? "no environment" : win_strerror(GetLastError(), msg, sizeof msg));
    if (env != NULL) {
        /* The token is in the block: clear it before freeing. */
        wchar_t *p = env;
        while (*p != L'\0')
            p += wcslen(p) + 1;
        SecureZeroMemory(env, (size_t)(p - env) * sizeof *env);
    }
    free(env);
    free(line);
    if (nul != INVALID_HANDLE_VALUE)
        CloseHandle(nul);
    if (errh != NULL)
        CloseHandle(errh);
    if (!ok)
        return QCD_RUN_FAILED;
    CloseHandle(pi.hThread);
    WaitForSingleObject(pi.hProcess, INFINITE);
    if (!GetExitCodeProcess(pi.hProcess, &exit_code)) {
        snprintf(err, errlen, "GetExitCodeProcess: %s", win_strerror(GetLastError(), msg, sizeof msg));
        CloseHandle(pi.hProcess);
        return QCD_RUN_FAILED;
    }
    CloseHandle(pi.hProcess);
    *code = (int)exit_code;
    return QCD_RUN_EXITED;
}

/* ---- files */

FILE *qcd_fopen(const char *path, const char *mode)
{
    wchar_t *wp = to_wide(path, -1), *wm = to_wide(mode, -1);
    FILE *f = wp != NULL && wm != NULL ? _wfopen(wp, wm) : NULL;

    if (wp == NULL)
        errno = EINVAL;
    free(wp);
    free(wm);
    return f;
}

/* A UTF-16 string as UTF-8 into buf[0..n); 0 if it does not fit. */
static int put_utf8(const wchar_t *w, char *buf, size_t n)
{
    char *s = to_utf8(w, -1);
    size_t len = strlen(s);
    int ok = len < n;

    if (ok)
        memcpy(buf, s, len + 1);
    free(s);
    return ok;
}

int qcd_getcwd(char *buf, size_t n)
{
    wchar_t w[32768];
    DWORD len = GetCurrentDirectoryW((DWORD)COUNT_OF(w), w);

    return len > 0 && len < COUNT_OF(w) && put_utf8(w, buf, n);
}

int qcd_realpath(const char *path, char *buf, size_t n)
{
    wchar_t *wp = to_wide(path, -1), full[32768];
    DWORD len = wp != NULL ? GetFullPathNameW(wp, (DWORD)COUNT_OF(full), full, NULL) : 0;
    int ok = len > 0 && len < COUNT_OF(full) && GetFileAttributesW(full) != INVALID_FILE_ATTRIBUTES;

    free(wp);
    return ok && put_utf8(full, buf, n);
}

int qcd_is_dir_sep(char c) { return c == '\\' || c == '/'; }

int qcd_path_is_absolute(const char *s, size_t n)
{
    /* C:\... or C:/..., and \\server\share\... (or \\?\...) */
    if (n >= 3 && ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')) && s[1] == ':' &&
        qcd_is_dir_sep(s[2]))
        return 1;
    return n >= 2 && qcd_is_dir_sep(s[0]) && qcd_is_dir_sep(s[1]);
}

int qcd_is_executable(const char *path)
{
    wchar_t *wp = to_wide(path, -1);
    DWORD attrs = wp != NULL ? GetFileAttributesW(wp) : INVALID_FILE_ATTRIBUTES;

    free(wp);
    return attrs != INVALID_FILE_ATTRIBUTES && !(attrs & FILE_ATTRIBUTE_DIRECTORY);
}

char *qcd_module_dir(const void *addr)
{
    HMODULE mod = NULL;
    wchar_t w[32768];
    DWORD len;
    char *s, *sep;

    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &mod))
        return NULL;
    len = GetModuleFileNameW(mod, w, (DWORD)COUNT_OF(w));
    if (len == 0 || len >= COUNT_OF(w))
        return NULL;
    s = to_utf8(w, (int)len);
    sep = strrchr(s, '\\');
    if (sep == NULL)
        sep = strrchr(s, '/');
    if (sep == NULL) {
        free(s);
        return NULL;
    }
    *sep = '\0';
    return s;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int qcd_platform_win32_unused;
#endif /* _WIN32 */
