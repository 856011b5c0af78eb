package qwen.companion

import com.sun.jna.Library
import com.sun.jna.Native
import com.sun.jna.Platform
import com.sun.jna.Pointer
import com.sun.jna.Structure

/**
 * What differs between Linux, macOS and Windows for a host of the library,
 * one function per question, each taking the [Os] explicitly so that every
 * platform's answer can be tested on any machine:
 * - [libraryFileName], [bridgeFileName]: the shared library and the
 *   `qc-mcp-bridge` executable;
 * - [shellFor], [shellOfPath], [envLine], [envLines]: "set these in your
 *   shell" lines for POSIX shells, fish, PowerShell and cmd;
 * - [eventWaitMethod], [handleFromInt32], [waitEventHandle]: waiting on the
 *   pull-mode handle of `*_enable_events` (a file descriptor on Linux and
 *   macOS, an event `HANDLE` carried in the `int32_t` on Windows).
 */
object QcPlatform {
    enum class Os { LINUX, MACOS, WINDOWS }

    enum class Shell(val id: String) { POSIX("posix"), FISH("fish"), POWERSHELL("powershell"), CMD("cmd") }

    /** This JVM's OS, from JNA's [Platform] (every other Unix counts as [Os.LINUX]). */
    @JvmStatic
    fun current(): Os = when {
        Platform.isWindows() -> Os.WINDOWS
        Platform.isMac() -> Os.MACOS
        else -> Os.LINUX
    }

    /** `libqwen_companion.so`, `libqwen_companion.dylib` or `qwen_companion.dll` (msvc and gnu builds alike). */
    @JvmStatic
    @JvmOverloads
    fun libraryFileName(os: Os = current()): String = when (os) {
        Os.WINDOWS -> "qwen_companion.dll"
        Os.MACOS -> "libqwen_companion.dylib"
        Os.LINUX -> "libqwen_companion.so"
    }

    /** `qc-mcp-bridge`, or `qc-mcp-bridge.exe` on Windows. */
    @JvmStatic
    @JvmOverloads
    fun bridgeFileName(os: Os = current()): String = if (os == Os.WINDOWS) "qc-mcp-bridge.exe" else "qc-mcp-bridge"

    // ---- shell lines -------------------------------------------------------------------

    /**
     * The shell to write lines for: [setting] when it names a [Shell]; for
     * "auto" (or blank) the shell of [shellPath] (the editor's configured
     * terminal shell; by default `$SHELL` except on Windows) when known, else PowerShell on Windows
     * and POSIX elsewhere. Throws [IllegalArgumentException] for any other setting.
     */
    @JvmStatic
    @JvmOverloads
    fun shellFor(setting: String?, os: Os = current(), shellPath: String? = if (os == Os.WINDOWS) null else System.getenv("SHELL")): Shell {
        val choice = setting?.trim()?.toLowerCase().orEmpty().ifEmpty { "auto" }
        Shell.values().firstOrNull { it.id == choice }?.let { return it }
        require(choice == "auto") { "unknown terminal shell '$setting': use one of auto, ${Shell.values().joinToString(", ") { it.id }}" }
        return shellOfPath(shellPath) ?: if (os == Os.WINDOWS) Shell.POWERSHELL else Shell.POSIX
    }

    /** The [Shell] of a shell executable path (`/usr/bin/fish`, `C:\…\pwsh.exe`, `cmd.exe`, `bash`…), or null when none is given. */
    @JvmStatic
    fun shellOfPath(path: String?): Shell? {
        if (path.isNullOrBlank()) return null
        val t = path.trim()
        val command = if (t.startsWith("\"")) t.substring(1).substringBefore('"') else t.substringBefore(" -").trim()
        val exe = command.substringAfterLast('/').substringAfterLast('\\').toLowerCase().removeSuffix(".exe")
        return when (exe) {
            "fish" -> Shell.FISH
            "pwsh", "powershell" -> Shell.POWERSHELL
            "cmd" -> Shell.CMD
            else -> Shell.POSIX
        }
    }

    private val NAME = Regex("[A-Za-z_][A-Za-z0-9_]*")

    // PowerShell ends a single-quoted string at ' and at the typographic single quotes.
    private const val PS_QUOTES = "'\u2018\u2019\u201a\u201b"

    /**
     * One line that sets [key] to [value] in [shell]: `export K='v'`,
     * `set -gx K 'v'`, `$env:K = 'v'` or `set "K=v"`; every character of
     * [value] arrives verbatim. Throws [IllegalArgumentException] for a bad
     * name, a NUL, and for cmd, which cannot carry a line break, `"` or `%`.
     */
    @JvmStatic
    fun envLine(key: String, value: String, shell: Shell): String {
        require(NAME.matches(key)) { "not an environment variable name: '$key'" }
        require('\u0000' !in value) { "the value of $key contains a NUL character" }
        return when (shell) {
            Shell.POSIX -> "export $key='" + value.replace("'", "'\\''") + "'"
            Shell.FISH -> "set -gx $key '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
            Shell.POWERSHELL -> "\$env:$key = '" + buildString { for (c in value) { append(c); if (c in PS_QUOTES) append(c) } } + "'"
            Shell.CMD -> {
                for ((bad, what) in listOf(
                    "\n" to "a line break", "\r" to "a line break", "\"" to "a double quote (\")",
                    "%" to "a percent sign (%), which cmd expands as a variable reference"
                )) {
                    require(bad !in value) { "cmd cannot set $key to a value with $what: use PowerShell (terminal shell \"powershell\") for this variable" }
                }
                "set \"$key=$value\"" // & | < > ^ ( ) ; and spaces are literal inside the quotes
            }
        }
    }

    /** [envLine] for each variable of [env], sorted by name. */
    @JvmStatic
    fun envLines(env: Map<String, String>, shell: Shell): List<String> = env.keys.sorted().map { envLine(it, env.getValue(it), shell) }

    // ---- the pull-mode event handle ----------------------------------------------------

    enum class WaitMethod { POLL, WAIT_FOR_SINGLE_OBJECT }

    /** [WaitMethod.POLL] on the descriptor (Linux, macOS), [WaitMethod.WAIT_FOR_SINGLE_OBJECT] on the HANDLE (Windows). */
    @JvmStatic
    @JvmOverloads
    fun eventWaitMethod(os: Os = current()): WaitMethod = if (os == Os.WINDOWS) WaitMethod.WAIT_FOR_SINGLE_OBJECT else WaitMethod.POLL

    /** The Windows `HANDLE` an `int32_t` carries: `(HANDLE)(intptr_t)value`, sign-extended (-1 is 0xFFFF…FFFF). */
    @JvmStatic
    fun handleFromInt32(value: Int): Pointer = Pointer(value.toLong())

    @Suppress("FunctionName")
    private interface Kernel32 : Library {
        fun WaitForSingleObject(handle: Pointer, milliseconds: Int): Int
    }

    @Suppress("FunctionName")
    private interface LibC : Library {
        fun poll(fds: PollFd, nfds: Long, timeout: Int): Int
    }

    @Structure.FieldOrder("fd", "events", "revents")
    class PollFd : Structure() {
        @JvmField var fd: Int = 0
        @JvmField var events: Short = 0
        @JvmField var revents: Short = 0
    }

    private val kernel32 by lazy { Native.load("kernel32", Kernel32::class.java) }
    private val libc by lazy { Native.load(Platform.C_LIBRARY_NAME, LibC::class.java) }

    private const val WAIT_OBJECT_0 = 0
    private const val WAIT_TIMEOUT = 0x102
    private const val INFINITE = -1 // 0xFFFFFFFF
    private const val POLLIN: Short = 1

    /**
     * Waits until the pull-mode handle [value] (what `enableEvents` returned)
     * signals that events wait, or [timeoutMs] pass (negative: no limit).
     * Returns true when events wait; call `nextEvent` until it gives null either way.
     */
    @JvmStatic
    @JvmOverloads
    fun waitEventHandle(value: Int, timeoutMs: Int, os: Os = current()): Boolean = when (eventWaitMethod(os)) {
        WaitMethod.WAIT_FOR_SINGLE_OBJECT -> {
            when (val rc = kernel32.WaitForSingleObject(handleFromInt32(value), if (timeoutMs < 0) INFINITE else timeoutMs)) {
                WAIT_OBJECT_0 -> true
                WAIT_TIMEOUT -> false
                else -> throw java.io.IOException("WaitForSingleObject on the event handle $value failed (result 0x${Integer.toHexString(rc)})")
            }
        }
        WaitMethod.POLL -> pollReadable(value, timeoutMs)
    }

    private fun pollReadable(fd: Int, timeoutMs: Int): Boolean {
        val p = PollFd()
        p.fd = fd
        p.events = POLLIN
        while (true) {
            val rc = libc.poll(p, 1, timeoutMs)
            if (rc >= 0) {
                p.read()
                return rc > 0 && (p.revents.toInt() and POLLIN.toInt()) != 0
            }
            val errno = Native.getLastError()
            if (errno != 4) throw java.io.IOException("poll on the event descriptor $fd failed (errno $errno)") // 4: EINTR, retried
        }
    }
}
