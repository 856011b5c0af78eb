package qwen.companion.intellij.core

import qwen.companion.CompanionCli
import qwen.companion.DiscoveryFiles

/**
 * What the status bar shows for a project: whether the companion runs,
 * how many CLIs (Qwen Code, Gemini CLI) are connected, the diffs waiting for
 * the user, the last error (of the companion or the plugin host), the CLIs
 * served and their discovery files.
 */
data class CompanionStatus(
    val running: Boolean,
    val port: Int?,
    val connectedClis: Int,
    val pendingDiffs: Int,
    val lastError: String?,
    val served: CompanionCli = CompanionCli.QWEN,
    val discoveryFiles: DiscoveryFiles? = null
) {
    /** The widget's short text. */
    val text: String
        get() = when {
            !running && lastError != null -> "Qwen: error"
            !running -> "Qwen: off"
            pendingDiffs > 0 -> "Qwen: ${plural(pendingDiffs, "diff")} pending"
            connectedClis > 0 -> "Qwen: ${plural(connectedClis, "CLI")}"
            else -> "Qwen: ready"
        }

    /** The widget's tooltip: every field in one line each. */
    val tooltip: String
        get() {
            val lines = ArrayList<String>()
            lines.add(if (running) "Qwen Code companion on 127.0.0.1:$port" else "Qwen Code companion is not running")
            if (running) lines.addAll(Served.lines(served, discoveryFiles ?: DiscoveryFiles(null, null)))
            if (running) lines.add("Connected CLIs: $connectedClis")
            if (running) lines.add("Diffs waiting for you: $pendingDiffs")
            if (lastError != null) lines.add("Last error: $lastError")
            return lines.joinToString("\n")
        }

    companion object {
        private fun plural(n: Int, what: String) = if (n == 1) "1 $what" else "$n ${what}s"
    }
}

/**
 * Counts the CLI sessions whose notification stream is open, from the
 * library's log lines (the C API has no query for it): `session ID:
 * connected, sending context` (info) when a stream opens, `session ID:
 * notification stream closed` and `session ID: closed and freed` (debug)
 * when it ends, `stopped (port N)` when the server stops. The companion's
 * log level must be DEBUG for the closing lines.
 */
class SessionTracker {
    private val lock = Any()
    private val open = LinkedHashSet<String>()
    @Volatile private var listener: (() -> Unit)? = null

    val connected: Int get() = synchronized(lock) { open.size }

    /** Called after each change of [connected] (on the library's callback thread). */
    fun onChange(l: (() -> Unit)?) {
        listener = l
    }

    /** Feeds one library log line; true when it changed the count. */
    fun onLog(message: String): Boolean {
        val changed = synchronized(lock) {
            val m = SESSION.find(message)
            when {
                m != null && m.groupValues[2].startsWith("connected") -> open.add(m.groupValues[1])
                m != null && (m.groupValues[2].startsWith("notification stream closed") || m.groupValues[2].startsWith("closed and freed")) ->
                    open.remove(m.groupValues[1])
                STOPPED.containsMatchIn(message) -> (open.isNotEmpty()).also { open.clear() }
                else -> false
            }
        }
        if (changed) listener?.invoke()
        return changed
    }

    fun clear() {
        val changed = synchronized(lock) { open.isNotEmpty().also { open.clear() } }
        if (changed) listener?.invoke()
    }

    companion object {
        private val SESSION = Regex("^session (\\S+): (.*)$")
        private val STOPPED = Regex("^stopped \\(port \\d+\\)")
    }
}
