package qwen.companion.intellij.core.sessions

import java.util.Locale

/** The states of a message we sent (`qc_participant_send_state_json`). */
object ReceiptStates {
    val FINAL = setOf("delivered", "denied", "refused", "expired", "misaddressed", "dropped")

    fun isFinal(state: String): Boolean = FINAL.contains(state)

    /** What the user reads for [state] (`reason` / `dropReason` of the receipt appended when given). */
    fun describe(state: String, reason: String? = null, dropReason: String? = null): String {
        val base = when (state) {
            "pending" -> "sent, waiting for the recipient"
            "held" -> "held for the recipient's review"
            "delivered" -> "delivered"
            "denied" -> "denied by the recipient's user"
            "refused" -> "refused by the recipient"
            "expired" -> "expired before delivery"
            "misaddressed" -> "misaddressed (that name now belongs to another session)"
            "dropped" -> "dropped at the recipient's inbox" + (if (dropReason != null && dropReason.isNotBlank()) " ($dropReason)" else "")
            "not-sent" -> "not sent"
            else -> state
        }
        return if (reason != null && reason.isNotBlank()) "$base: $reason" else base
    }
}

/** One message we sent, as the IDE shows it. */
data class SentMessage(
    val msgId: String,
    val to: String,
    val preview: String,
    val state: String,
    val reason: String?,
    val dropReason: String?,
    /** pending → held → delivered, in order. */
    val history: List<String>
) {
    val isFinal: Boolean get() = ReceiptStates.isFinal(state)

    /** `→ alpha: "hello" — delivered` */
    fun describe(): String = "→ $to: \"$preview\" — ${ReceiptStates.describe(state, reason, dropReason)}"
}

/**
 * Follows the receipts of what the editor sent: [sent] starts a message at
 * `pending`; each receipt ([onReceipt], the library's `{msgId, status,
 * previous, reason?, dropReason?}`) moves it on; listeners see every change.
 * A refusal before sending (rate, repeat) is recorded with [notSent] and its
 * message. Thread-safe.
 */
class ReceiptTracker(private val keep: Int = 200) {
    private val lock = Any()
    private val items = LinkedHashMap<String, SentMessage>()
    private val listeners = ArrayList<(SentMessage) -> Unit>()
    private var notSentN = 0

    fun addListener(l: (SentMessage) -> Unit) {
        synchronized(lock) { listeners.add(l) }
    }

    fun sent(msgId: String, to: String, content: String): SentMessage =
        put(SentMessage(msgId, to, preview(content), "pending", null, null, listOf("pending")))

    fun notSent(to: String, content: String, message: String): SentMessage {
        val id = synchronized(lock) { "not-sent-${++notSentN}" }
        return put(SentMessage(id, to, preview(content), "not-sent", message, null, listOf("not-sent")))
    }

    /** Applies a receipt; null when it is for a message we do not track or repeats the state. */
    fun onReceipt(r: Map<String, Any?>): SentMessage? {
        val id = r["msgId"] as? String ?: return null
        val status = r["status"] as? String ?: return null
        val updated = synchronized(lock) {
            val cur = items[id] ?: return null
            if (cur.state == status || cur.isFinal) return null
            cur.copy(state = status, reason = r["reason"] as? String, dropReason = r["dropReason"] as? String, history = cur.history + status)
        }
        return put(updated)
    }

    /** Applies a state document (`sendState` / `wait`) — the same transitions as a receipt. */
    fun onState(s: Map<String, Any?>): SentMessage? {
        val last = s["last"] as? Map<*, *>
        val m = LinkedHashMap<String, Any?>()
        m["msgId"] = s["msgId"]
        m["status"] = s["state"]
        m["reason"] = last?.get("reason")
        m["dropReason"] = last?.get("dropReason")
        return onReceipt(m)
    }

    fun get(msgId: String): SentMessage? = synchronized(lock) { items[msgId] }

    /** Newest first. */
    fun all(): List<SentMessage> = synchronized(lock) { items.values.reversed() }

    private fun put(m: SentMessage): SentMessage {
        val ls = synchronized(lock) {
            items.remove(m.msgId)
            items[m.msgId] = m
            while (items.size > keep) items.remove(items.keys.first())
            ArrayList(listeners)
        }
        for (l in ls) l(m)
        return m
    }

    companion object {
        fun preview(content: String, max: Int = 60): String {
            val flat = content.replace(Regex("\\s+"), " ").trim()
            return if (flat.length <= max) flat else flat.substring(0, max - 1) + "…"
        }
    }
}

/** A live session of the registry, as the sessions list shows it. */
data class SessionRow(
    val name: String,
    val ref: String,
    val cwd: String,
    val kind: String,
    val startedAt: Long,
    /** What to send to: the shortest unambiguous address (`name`, `name [ref]`). */
    val address: String,
    val reachable: Boolean,
    /** The session's process id (0 when the record has none). */
    val pid: Long = 0L,
    /** The session runs in a process this IDE started (e.g. `qwen` in the IDE's terminal). */
    val startedByIde: Boolean = false
) {
    /** `alpha [a1b2c3]  qwen  /work/alpha  5m  (this IDE)` */
    fun describe(nowMs: Long): String =
        "$name [$ref]  $kind  $cwd  ${age(nowMs - startedAt)}" + (if (startedByIde) "  (this IDE)" else "") + if (reachable) "" else "  (not answering)"

    companion object {
        /** From an entry of `peers()` / `list()`; null without a name or ref. */
        fun of(e: Map<String, Any?>): SessionRow? {
            val name = e["name"] as? String ?: return null
            val ref = e["ref"] as? String ?: return null
            val address = e["address"] as? String ?: "$name [$ref]"
            val pid = (e["pid"] as? Number)?.toLong() ?: 0L
            return SessionRow(name, ref, e["cwd"] as? String ?: "", e["kind"] as? String ?: "qwen",
                (e["startedAt"] as? Number)?.toLong() ?: 0L, address, e["reachable"] != false, pid, startedByIde(pid))
        }

        /**
         * Whether [pid] is a descendant of [ancestor] (default: this IDE's
         * process): a `qwen` started in the IDE's terminal runs under the
         * terminal's shell, a child of the IDE. False for the IDE itself.
         */
        fun startedByIde(pid: Long, ancestor: Long = ProcessHandle.current().pid()): Boolean {
            if (pid <= 0 || pid == ancestor) return false
            var cur = ProcessHandle.of(pid).orElse(null)
            var hops = 0
            while (cur != null && hops++ < 64) {
                val parent = cur.parent().orElse(null) ?: return false
                if (parent.pid() == ancestor) return true
                cur = parent
            }
            return false
        }

        /** `45s`, `12m`, `3h 05m`, `2d 04h`. */
        fun age(ms: Long): String {
            val s = Math.max(0L, ms / 1000)
            return when {
                s < 60 -> "${s}s"
                s < 3600 -> "${s / 60}m"
                s < 86400 -> String.format(Locale.ROOT, "%dh %02dm", s / 3600, (s % 3600) / 60)
                else -> String.format(Locale.ROOT, "%dd %02dh", s / 86400, (s % 86400) / 3600)
            }
        }
    }
}
