package qwen.companion.intellij.core

import java.text.SimpleDateFormat
import java.util.ArrayDeque
import java.util.Date
import java.util.Locale

/**
 * The library's health report (`qc_health_json`: `{"library": {version,
 * abi, platform}, "checks": [{id, status, summary, detail?, …}]}`) as text:
 * a header line, then one line per check in the order given, `[ok]`,
 * `[warn]`, `[error]` or `[off]` before its summary, and its `detail`
 * indented below.
 */
object HealthText {
    fun format(report: Map<String, Any?>): String {
        val sb = StringBuilder()
        val lib = report["library"] as? Map<*, *>
        if (lib != null) {
            sb.append("qwen-companion library ").append(lib["version"] ?: "?")
                .append(" (ABI ").append(lib["abi"] ?: "?").append(", ").append(lib["platform"] ?: "?").append(")\n")
        }
        val checks = report["checks"] as? List<*> ?: emptyList<Any?>()
        for (c in checks) {
            val check = c as? Map<*, *> ?: continue
            val status = check["status"] as? String ?: "?"
            val id = check["id"] as? String ?: "?"
            sb.append('[').append(status).append("] ").append(id).append(": ").append(check["summary"] ?: "").append('\n')
            val detail = check["detail"] as? String
            if (detail != null && detail.isNotBlank()) {
                for (line in detail.trimEnd().split('\n')) sb.append("      ").append(line).append('\n')
            }
        }
        if (checks.isEmpty()) sb.append("(the report has no checks)\n")
        return sb.toString()
    }

    /** The worst status of the report (`error` > `warn` > `ok`/`off`), for the dialog's icon. */
    fun worst(report: Map<String, Any?>): String {
        val statuses = (report["checks"] as? List<*> ?: emptyList<Any?>()).mapNotNull { (it as? Map<*, *>)?.get("status") as? String }
        return when {
            "error" in statuses -> "error"
            "warn" in statuses -> "warn"
            else -> "ok"
        }
    }
}

/**
 * The last [capacity] log lines of the plugin (its own and the library's),
 * for "Show Qwen Companion Log"; every line also goes to the IDE's log
 * (`idea.log`). Thread-safe; older lines are dropped (and counted).
 */
class LogRing(val capacity: Int = 2000, private val clock: () -> Long = System::currentTimeMillis) {
    private val lines = ArrayDeque<String>()
    private var dropped = 0L

    init {
        require(capacity > 0) { "capacity must be positive" }
    }

    fun add(level: String, message: String) {
        val stamp = SimpleDateFormat("HH:mm:ss.SSS", Locale.ROOT).format(Date(clock()))
        val line = "$stamp ${level.padEnd(5)} ${message.replace("\r", "").replace("\n", "\n      ")}"
        synchronized(lines) {
            if (lines.size >= capacity) {
                lines.removeFirst()
                dropped++
            }
            lines.addLast(line)
        }
    }

    fun snapshot(): List<String> = synchronized(lines) { ArrayList(lines) }

    /** The lines as one text, with a first line saying how many older lines were dropped. */
    fun text(): String = synchronized(lines) {
        val sb = StringBuilder()
        if (dropped > 0) sb.append("(").append(dropped).append(" older lines dropped; the IDE's log, idea.log, has every line)\n")
        for (l in lines) sb.append(l).append('\n')
        sb.toString()
    }

    /** A [HostLog] writing to [inner] and to this ring. */
    fun tee(inner: HostLog): HostLog = object : HostLog {
        override fun info(message: String) {
            add("INFO", message)
            inner.info(message)
        }

        override fun warn(message: String, error: Throwable?) {
            add("WARN", if (error == null) message else "$message: $error")
            inner.warn(message, error)
        }

        override fun error(message: String, error: Throwable?) {
            add("ERROR", if (error == null) message else "$message: $error")
            inner.error(message, error)
        }
    }
}
