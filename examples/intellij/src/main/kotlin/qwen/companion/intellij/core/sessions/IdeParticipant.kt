package qwen.companion.intellij.core.sessions

import qwen.companion.HeldExpiry
import qwen.companion.InboundPolicy
import qwen.companion.InboundSettings
import qwen.companion.LogLevel
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenParticipant
import qwen.companion.QwenParticipantConfig
import qwen.companion.RegisterOptions
import qwen.companion.ReviewClass
import qwen.companion.intellij.core.HostLog

/** The inbox policy setting: the library's mode-parity default, or an explicit policy. */
enum class InboxPolicy(val setting: String, val wire: InboundPolicy?) {
    DEFAULT("default", null), ACCEPT("accept", InboundPolicy.ACCEPT), HOLD("hold", InboundPolicy.HOLD), REFUSE("refuse", InboundPolicy.REFUSE);

    companion object {
        /** The policy of a stored setting value (unknown / null → [DEFAULT]). */
        fun of(setting: String?): InboxPolicy = values().firstOrNull { it.setting == setting?.trim()?.toLowerCase() } ?: DEFAULT
    }
}

/** A message a session sent to the editor. */
data class ReceivedMessage(
    val msgId: String,
    val fromName: String,
    /** `peer`, `own-process` or `controller` (what the connection proved). */
    val origin: String,
    val controllerLabel: String?,
    /** The library's neutralised text (every `<` escaped). */
    val text: String,
    val receivedAt: Long,
    /** The `path:line` places the message names, resolved against the project. */
    val places: List<PathLine>
) {
    /** `alpha (peer)`, `build bot (controller: ci)`. */
    fun sender(): String = "$fromName (" + origin + (if (controllerLabel != null) ": $controllerLabel" else "") + ")"
}

/** A message held for the user's review. */
data class HeldMessage(
    val msgId: String,
    val fromName: String,
    val origin: String,
    val text: String,
    val cause: String,
    val heldAt: Long,
    /** Null: never expires. */
    val expiresAt: Long?
) {
    fun describe(nowMs: Long): String {
        val exp = if (expiresAt == null) "no expiry" else "expires in ${SessionRow.age(expiresAt - nowMs)}"
        return "$fromName ($origin, $cause, $exp): ${ReceiptTracker.preview(text, 80)}"
    }
}

/** What the participant tells the IDE (on the library's `qc-cb` thread: post UI work to the UI thread). */
interface ParticipantListener {
    fun messageReceived(m: ReceivedMessage) {}
    fun heldChanged(held: List<HeldMessage>) {}
    fun receiptChanged(m: SentMessage) {}
}

/** Settings of a project's participant. */
data class ParticipantSettings(
    /** The registered name ([ParticipantName.derive]). */
    val name: String,
    /** The project folder: the record's `cwd`, and the base of relative `path:line`s. */
    val cwd: String,
    val policy: InboxPolicy = InboxPolicy.DEFAULT,
    val heldExpiry: HeldExpiry = HeldExpiry.FIVE_MINUTES,
    /** null: the library's default (`$QWEN_HOME`, else `~/.qwen`). */
    val qwenHome: String? = null,
    /** Test override of `$XDG_RUNTIME_DIR`. */
    val runtimeDir: String? = null,
    val libraryPath: String? = null
)

/**
 * The project's cross-session participant (kind `external`): registered at
 * project open ([start]), unregistered at close ([close]). Lists the live
 * sessions, sends the editor's text and follows its receipts, collects the
 * messages sessions send to the editor, and keeps the held ones for release
 * or deny. Every method may block briefly (a send: up to about 5 s): call
 * them off the UI thread. Library failures come back as sentences, never as
 * exceptions.
 */
class IdeParticipant(
    @Volatile var settings: ParticipantSettings,
    private val listener: ParticipantListener,
    private val log: HostLog,
    private val clock: () -> Long = { System.currentTimeMillis() }
) : AutoCloseable {
    private val lock = Any()
    private var p: QwenParticipant? = null
    private var closed = false
    @Volatile var lastError: String? = null
        private set
    val receipts = ReceiptTracker()
    private val received = ArrayList<ReceivedMessage>()
    @Volatile private var heldNow: List<HeldMessage> = emptyList()

    init {
        receipts.addListener { listener.receiptChanged(it) }
    }

    val isRunning: Boolean get() = synchronized(lock) { p != null }

    /** The registered participant (for the health report), or null. */
    val current: QwenParticipant? get() = synchronized(lock) { p }

    /** Our session (`sessionId`, `name`, `ref`, …), or null when not registered. */
    fun session(): Map<String, Any?>? = try {
        synchronized(lock) { p }?.sessions()?.firstOrNull()
    } catch (e: QwenCompanionException) {
        null
    }

    /** Registers the participant; false (with [lastError]) when the library or the registry refuses. */
    fun start(): Boolean {
        synchronized(lock) {
            if (closed) return false
            if (p != null) return true
            val s = settings
            val part = try {
                val lib = if (s.libraryPath != null) QwenCompanionLibrary.load(s.libraryPath) else QwenCompanionLibrary.load()
                QwenParticipant(QwenParticipantConfig(qwenHome = s.qwenHome, runtimeDir = s.runtimeDir, kind = "external",
                    version = "qwen-companion intellij", inboundPolicy = s.policy.wire, reviewClass = ReviewClass.PROMPTING,
                    heldExpiry = s.heldExpiry), lib)
            } catch (e: QwenCompanionException) {
                lastError = e.message
                log.warn("cross-session participant unavailable: ${e.message}", e)
                return false
            }
            try {
                part.setLogHandler({ level, msg -> if (level == LogLevel.ERROR) log.warn("participant: $msg", null) else log.info("participant: $msg") }, LogLevel.WARN)
                part.onReceipt { r -> receipts.onReceipt(r) }
                part.onHeld { l -> heldChanged(l) }
                part.onMessage { m -> messageArrived(m) }
                part.register(RegisterOptions(name = s.name, cwd = s.cwd, kind = "external"))
            } catch (e: QwenCompanionException) {
                lastError = e.message
                log.warn("cannot register ${s.name}: ${e.message}", e)
                part.close()
                return false
            }
            p = part
            lastError = null
            log.info("registered cross-session participant ${s.name}")
            return true
        }
    }

    /** Re-registers under the current [settings] (name or policy changed). */
    fun restart(newSettings: ParticipantSettings): Boolean {
        val old = synchronized(lock) {
            settings = newSettings
            p.also { p = null }
        }
        old?.close()
        heldChanged(emptyList())
        return start()
    }

    /** The live sessions a message can go to (not our own), newest first, from a fresh registry read. */
    fun sessions(): List<SessionRow> {
        val part = synchronized(lock) { p } ?: return emptyList()
        return try {
            val own = session()?.get("sessionId") as? String
            part.peers(own).mapNotNull { SessionRow.of(it) }
        } catch (e: QwenCompanionException) {
            lastError = e.message
            emptyList()
        }
    }

    /**
     * Sends [content] to [address]: `pending` and then each receipt through
     * [receipts]; a refusal before sending (rate, repeat, unknown or
     * ambiguous address, too long) is a `not-sent` entry with the library's message.
     */
    fun send(address: String, content: String): SentMessage {
        val part = synchronized(lock) { p } ?: return receipts.notSent(address, content, lastError ?: "the participant is not registered")
        if (content.isBlank()) return receipts.notSent(address, content, "nothing to send")
        return try {
            val r = part.send(address, content)
            val id = r["msgId"] as String
            val m = receipts.sent(id, r["address"] as? String ?: address, content)
            // A receipt may have arrived before we tracked the id: read the state once.
            try {
                receipts.onState(part.sendState(id))
            } catch (e: QwenCompanionException) {
            }
            receipts.get(id) ?: m
        } catch (e: QwenCompanionException.Call) {
            receipts.notSent(address, content, e.detail)
        } catch (e: QwenCompanionException) {
            receipts.notSent(address, content, e.message ?: e.toString())
        }
    }

    /** Waits up to [timeoutMs] for [msgId] to reach a final state; its record afterwards. */
    fun awaitFinal(msgId: String, timeoutMs: Long): SentMessage? {
        val part = synchronized(lock) { p } ?: return receipts.get(msgId)
        try {
            receipts.onState(part.wait(msgId, timeoutMs, true))
        } catch (e: QwenCompanionException) {
        }
        return receipts.get(msgId)
    }

    /**
     * The environment for processes the IDE starts (its terminals):
     * `QWEN_CODE_MESSAGING_SOCKET` / `_TOKEN`, so a tool run there reaches
     * the IDE as `own-process` (Qwen itself drops inherited values at start,
     * so a `qwen` in that terminal stays a peer). Empty when not registered.
     */
    fun childEnv(): Map<String, String> {
        val part = synchronized(lock) { p } ?: return emptyMap()
        val sid = session()?.get("sessionId") as? String ?: return emptyMap()
        return try {
            part.childEnv(sid)
        } catch (e: QwenCompanionException) {
            emptyMap()
        }
    }

    /** Messages received, oldest first. */
    fun messages(): List<ReceivedMessage> = synchronized(received) { ArrayList(received) }

    fun held(): List<HeldMessage> = heldNow

    /** Delivers held message [msgId]; null, or why not. */
    fun release(msgId: String): String? = decide(msgId) { it.release(msgId) }

    /** Denies held message [msgId]; null, or why not. */
    fun deny(msgId: String): String? = decide(msgId) { it.deny(msgId) }

    private fun decide(msgId: String, f: (QwenParticipant) -> Unit): String? {
        val part = synchronized(lock) { p } ?: return "the participant is not registered"
        return try {
            f(part)
            null
        } catch (e: QwenCompanionException.Call) {
            e.detail
        } catch (e: QwenCompanionException) {
            e.message
        }
    }

    /** Applies a new inbox policy to the registered session (held messages are judged again); null or why not. */
    fun setPolicy(policy: InboxPolicy): String? {
        settings = settings.copy(policy = policy)
        val part = synchronized(lock) { p } ?: return null
        val sid = session()?.get("sessionId") as? String ?: return "the participant is not registered"
        return try {
            part.updateInbound(sid, InboundSettings(policy.wire, ReviewClass.PROMPTING, settings.heldExpiry))
            null
        } catch (e: QwenCompanionException.Call) {
            e.detail
        }
    }

    /** The policy the library applies now (read back), or null when not registered. */
    fun currentPolicy(): InboxPolicy? {
        val part = synchronized(lock) { p } ?: return null
        val sid = session()?.get("sessionId") as? String ?: return null
        return try {
            val w = part.inboundSettings(sid).policy
            InboxPolicy.values().first { it.wire == w }
        } catch (e: QwenCompanionException) {
            null
        }
    }

    private fun messageArrived(m: Map<String, Any?>) {
        val text = m["text"] as? String ?: ""
        val rm = ReceivedMessage(
            m["msgId"] as? String ?: "", m["fromName"] as? String ?: (m["from"] as? String ?: "unknown session"),
            m["origin"] as? String ?: "peer", m["controllerLabel"] as? String, text, clock(),
            PathLine.findAll(m["content"] as? String ?: "", settings.cwd)
        )
        synchronized(received) {
            received.add(rm)
            while (received.size > 500) received.removeAt(0)
        }
        listener.messageReceived(rm)
    }

    private fun heldChanged(l: List<Map<String, Any?>>) {
        val h = l.map {
            HeldMessage(it["msgId"] as? String ?: "", it["fromName"] as? String ?: (it["from"] as? String ?: "unknown session"),
                it["origin"] as? String ?: "peer", it["text"] as? String ?: "", it["cause"] as? String ?: "",
                (it["heldAt"] as? Number)?.toLong() ?: 0L, (it["expiresAt"] as? Number)?.toLong())
        }
        heldNow = h
        listener.heldChanged(h)
    }

    /** Unregisters (record and socket removed, held messages expire); idempotent. */
    override fun close() {
        val part = synchronized(lock) {
            closed = true
            p.also { p = null }
        }
        part?.close()
    }
}
