package qwen.companion.intellij.core.plugins

import qwen.companion.PluginInstallException
import qwen.companion.QwenCompanionException
import java.text.SimpleDateFormat
import java.util.Date
import java.util.Locale
import java.util.TimeZone

/** One row of the plugin manager. */
data class PluginRow(
    val id: String,
    val name: String,
    val version: String,
    val enabled: Boolean,
    /** The installed manifest no longer validates (the library's message), else null. */
    val broken: String?,
    /** The last crash / start failure / crash-loop reason, formatted, else null. */
    val lastError: String?,
    /**
     * Enabled, but stopped by the library's crash-loop breaker (its
     * `lastError` is the breaker's `disabled: …`): Enable restarts it.
     */
    val stoppedByCrashes: Boolean = false
) {
    /** `Name 1.2.0 (id) — disabled — last error: …` */
    fun describe(): String {
        val sb = StringBuilder()
        sb.append(name)
        if (version.isNotEmpty()) sb.append(' ').append(version)
        if (name != id) sb.append(" (").append(id).append(')')
        sb.append(if (!enabled) " — disabled" else if (stoppedByCrashes) " — stopped after crashes (Enable restarts it)" else " — enabled")
        if (broken != null) sb.append(" — broken: ").append(broken)
        if (lastError != null) sb.append(" — last error: ").append(lastError)
        return sb.toString()
    }
}

/** The result of a manager operation, for a balloon. */
data class ManagerResult(val ok: Boolean, val message: String)

/**
 * The plugin manager (install from a folder or `.zip`, list, enable/disable,
 * uninstall, the last error of a crashed or disabled plugin) over a
 * [PluginBackend]. Every method blocks and never throws for a library
 * failure: it answers a [ManagerResult] with the library's message (and the
 * manifest's problems, each with its JSON path).
 */
class PluginManagerModel(
    private val backend: PluginBackend,
    private val zone: TimeZone = TimeZone.getDefault(),
    private val clock: () -> Long = { System.currentTimeMillis() }
) {
    /** When the user last enabled each plugin here (unix ms): a breaker stop older than that was cleared. */
    private val enabledAt = java.util.concurrent.ConcurrentHashMap<String, Long>()

    fun rows(): List<PluginRow> = backend.list().mapNotNull { row(it) }

    fun row(e: Map<String, Any?>): PluginRow? {
        val id = e["id"] as? String ?: return null
        val broken = (e["error"] as? Map<*, *>)?.get("message")?.toString()
        // The list's `enabled` is the user's flag; the breaker's stop shows only as its lastError
        // (`disabled: …`), which the library keeps after Enable cleared the breaker.
        val le = e["lastError"] as? Map<*, *>
        val at = (le?.get("at") as? Number)?.toLong() ?: Long.MAX_VALUE
        val stopped = (le?.get("message") as? String)?.startsWith("disabled:") == true && at >= (enabledAt[id] ?: Long.MIN_VALUE)
        return PluginRow(id, e["name"] as? String ?: id, e["version"] as? String ?: "", e["enabled"] == true, broken, lastError(e["lastError"]), stopped)
    }

    /** `message (at yyyy-MM-dd HH:mm:ss)` of a `lastError` value (`{message, at: unix_ms}`), or null. */
    fun lastError(v: Any?): String? {
        val m = v as? Map<*, *> ?: return null
        val msg = m["message"]?.toString() ?: return null
        val at = (m["at"] as? Number)?.toLong() ?: return msg
        val f = SimpleDateFormat("yyyy-MM-dd HH:mm:ss", Locale.ROOT)
        f.timeZone = zone
        return "$msg (at ${f.format(Date(at))})"
    }

    fun install(src: String): ManagerResult = guard("install $src") {
        val s = backend.install(src)
        val what = "${s["name"] ?: s["id"]} ${s["version"] ?: ""}".trim()
        val prev = s["previousVersion"] as? String
        val warnings = (s["warnings"] as? List<*>)?.map { it.toString() } ?: emptyList()
        val sb = StringBuilder(if (s["replaced"] == true) "Updated $what" + (if (prev != null) " (was $prev)" else "") else "Installed $what")
        for (w in warnings) sb.append("\nwarning: ").append(w)
        sb.toString()
    }

    fun uninstall(id: String, removeData: Boolean): ManagerResult = guard("uninstall $id") {
        val r = backend.uninstall(id, removeData)
        "Uninstalled $id" + if (r["dataRemoved"] == true) " and removed its data" else " (its data is kept for a re-install)"
    }

    fun setEnabled(id: String, enabled: Boolean): ManagerResult = guard(if (enabled) "enable $id" else "disable $id") {
        if (enabled) {
            val t = clock()
            backend.enable(id)
            enabledAt[id] = t
        } else backend.disable(id)
        if (enabled) "Enabled $id" else "Disabled $id"
    }

    private fun guard(what: String, body: () -> String): ManagerResult = try {
        ManagerResult(true, body())
    } catch (e: PluginInstallException) {
        val sb = StringBuilder("Cannot $what: ${e.details["message"] ?: e.errorCode}")
        for (p in e.problems) sb.append("\n  ").append(p["path"] ?: "").append(": ").append(p["message"] ?: "")
        ManagerResult(false, sb.toString())
    } catch (e: QwenCompanionException.Call) {
        ManagerResult(false, "Cannot $what: ${e.detail}")
    }
}
