package qwen.companion.tests

import qwen.companion.QcPlatform
import qwen.companion.HeldExpiry
import qwen.companion.InboundPolicy
import qwen.companion.QwenParticipant
import qwen.companion.QwenParticipantConfig
import qwen.companion.ReviewClass
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.sessions.ConsoleCapture
import qwen.companion.intellij.core.sessions.HeldMessage
import qwen.companion.intellij.core.sessions.IdeParticipant
import qwen.companion.intellij.core.sessions.InboxPolicy
import qwen.companion.intellij.core.sessions.OutgoingText
import qwen.companion.intellij.core.sessions.ParticipantListener
import qwen.companion.intellij.core.sessions.ParticipantName
import qwen.companion.intellij.core.sessions.ParticipantSettings
import qwen.companion.intellij.core.sessions.PathLine
import qwen.companion.intellij.core.sessions.ReceiptStates
import qwen.companion.intellij.core.sessions.ReceiptTracker
import qwen.companion.intellij.core.sessions.ReceivedMessage
import qwen.companion.intellij.core.sessions.SentMessage
import qwen.companion.intellij.core.sessions.SessionRow
import java.io.File
import java.util.Collections

private object SessionLog : HostLog {
    val lines: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun info(message: String) { lines.add("I $message") }
    override fun warn(message: String, error: Throwable?) { lines.add("W $message") }
    override fun error(message: String, error: Throwable?) { lines.add("E $message") }
}

private class RecordingListener : ParticipantListener {
    val messages: MutableList<ReceivedMessage> = Collections.synchronizedList(ArrayList<ReceivedMessage>())
    val held: MutableList<List<HeldMessage>> = Collections.synchronizedList(ArrayList<List<HeldMessage>>())
    val receipts: MutableList<SentMessage> = Collections.synchronizedList(ArrayList<SentMessage>())
    val threads: MutableSet<String> = Collections.synchronizedSet(HashSet<String>())
    override fun messageReceived(m: ReceivedMessage) { threads.add(Thread.currentThread().name); messages.add(m) }
    override fun heldChanged(held: List<HeldMessage>) { threads.add(Thread.currentThread().name); this.held.add(held) }
    override fun receiptChanged(m: SentMessage) { receipts.add(m) }
}

fun intellijSessionTests(h: Harness, root: File) {
    h.group("intellij participant: pure helpers")

    h.test("participant name: intellij-<project>, sanitised, capped; the setting overrides") {
        checkEq(ParticipantName.derive("My Project!"), "intellij-my-project", "derived")
        checkEq(ParticipantName.derive("qwen [ref] x"), "intellij-qwen-ref-x", "no brackets (they would read as a ref)")
        checkEq(ParticipantName.derive("  --Ünïcode__proj.v2--  "), "intellij-n-code__proj.v2", "non-ASCII and edge dashes")
        checkEq(ParticipantName.derive("a".repeat(80)).length, ParticipantName.MAX, "capped")
        checkEq(ParticipantName.derive("p", override = " Build Box "), "build-box", "override")
        checkEq(ParticipantName.derive("p", override = "   "), "intellij-p", "blank override ignored")
        checkEq(ParticipantName.derive(null, override = "!!!"), "intellij", "nothing left")
        checkEq(ParticipantName.derive(null), "intellij", "no project")
    }

    h.test("path:line: absolute, relative (against the project), ~/, with column; not URLs or host:port") {
        val found = PathLine.findAll("see /w/src/Main.kt:12, then src/util.py:3:7 and ./a.rs:9; also ~/notes.md:2 " +
            "but not http://host:80/x nor localhost:8080 nor time 10:30 — again /w/src/Main.kt:12.", "/proj", "/home/me")
        checkEq(found.map { it.toString() }, listOf("/w/src/Main.kt:12", "/proj/src/util.py:3:7", "/proj/a.rs:9", "/home/me/notes.md:2"), "found")
        checkEq(PathLine.findAll("Main.kt:0 and README:4"), emptyList<PathLine>(), "line 0, no extension")
        checkEq(PathLine.findAll("(../up/x.kt:5)", "/p/q").map { it.path }, listOf("/p/up/x.kt"), "parent dir")
        // Windows: a drive path is absolute (kept as written when the test runs elsewhere), backslashes separate
        val win = PathLine.findAll("at C:\\w\\src\\Main.kt:4:2 and src\\util.kt:9, not http://h:80", null, null, QcPlatform.Os.WINDOWS)
        checkEq(win.map { it.toString() }, listOf("C:\\w\\src\\Main.kt:4:2", "src\\util.kt:9"), "Windows paths")
        check(PathLine.isAbsolute("C:/x", QcPlatform.Os.WINDOWS) && PathLine.isAbsolute("\\\\srv\\s\\x", QcPlatform.Os.WINDOWS) &&
            !PathLine.isAbsolute("C:\\x", QcPlatform.Os.LINUX) && PathLine.isAbsolute("/x", QcPlatform.Os.LINUX)) { "isAbsolute" }
    }

    h.test("selection with context and the console output are fenced safely; long text is capped") {
        checkEq(OutgoingText.selectionWithContext("/w/A.kt", 3, 5, "val x = 1\n", "Why?"), "Why?\n\n/w/A.kt:3-5\n```kotlin\nval x = 1\n```", "selection")
        checkEq(OutgoingText.selectionWithContext("/w/b", 7, 7, "has ``` inside"), "/w/b:7\n````\nhas ``` inside\n````", "fence longer than the text's")
        checkEq(OutgoingText.consoleOutput("tests", "FAIL x\n", false), "Output of the last run \"tests\":\n```\nFAIL x\n```", "console")
        val long = OutgoingText.cap("y".repeat(OutgoingText.MAX_CHARS + 10))
        checkEq(long.length, OutgoingText.MAX_CHARS, "capped")
        check(long.endsWith("…")) { "ellipsis" }
        val cc = ConsoleCapture(maxChars = 10)
        checkEq(cc.last(), null, "nothing ran")
        val t1 = cc.started("first")
        cc.append(t1, "hello ")
        val t2 = cc.started("second")
        cc.append(t1, "late text of the first run")
        cc.append(t2, "0123456789abcdef")
        checkEq(cc.last(), Triple("second", "6789abcdef", true), "tail of the newest run")
    }

    h.test("receipt states and the tracker: pending -> held -> delivered, final states stick") {
        checkEq(ReceiptStates.describe("dropped", "Your message was turned away", "rate"), "dropped at the recipient's inbox (rate): Your message was turned away", "dropped")
        checkEq(ReceiptStates.describe("held"), "held for the recipient's review", "held")
        check(ReceiptStates.isFinal("refused") && !ReceiptStates.isFinal("held") && !ReceiptStates.isFinal("pending")) { "final" }
        val t = ReceiptTracker()
        val seen = ArrayList<String>()
        t.addListener { seen.add(it.state) }
        t.sent("m1", "alpha", "hello\n  world")
        checkEq(t.onReceipt(mapOf("msgId" to "m1", "status" to "held")), t.get("m1"), "held applied")
        checkEq(t.onReceipt(mapOf("msgId" to "m1", "status" to "held")), null, "repeat ignored")
        t.onReceipt(mapOf("msgId" to "m1", "status" to "delivered", "reason" to "handed over"))
        checkEq(t.onReceipt(mapOf("msgId" to "m1", "status" to "expired")), null, "nothing after a final state")
        checkEq(t.onReceipt(mapOf("msgId" to "other", "status" to "delivered")), null, "unknown id")
        checkEq(t.get("m1")!!.history, listOf("pending", "held", "delivered"), "history")
        checkEq(t.get("m1")!!.describe(), "→ alpha: \"hello world\" — delivered: handed over", "describe")
        checkEq(seen, listOf("pending", "held", "delivered"), "listener")
        val ns = t.notSent("beta", "x", "too many messages")
        checkEq(ns.describe(), "→ beta: \"x\" — not sent: too many messages", "not sent")
        checkEq(t.all().map { it.msgId }, listOf(ns.msgId, "m1"), "newest first")
    }

    h.test("session rows: name, ref, cwd, kind (qwen when absent), age") {
        val r = SessionRow.of(mapOf("name" to "alpha", "ref" to "a1b2c3", "cwd" to "/w", "startedAt" to 1000L, "address" to "alpha", "reachable" to true))!!
        checkEq(r.describe(1000L + 3 * 3600_000L + 5 * 60_000L), "alpha [a1b2c3]  qwen  /w  3h 05m", "row")
        checkEq(SessionRow.age(45_000), "45s", "seconds")
        checkEq(SessionRow.age(12 * 60_000L), "12m", "minutes")
        checkEq(SessionRow.age(2 * 86400_000L + 4 * 3600_000L), "2d 04h", "days")
        checkEq(SessionRow.of(mapOf("name" to "x", "ref" to "r"))!!.address, "x [r]", "address default")
        checkEq(SessionRow.of(mapOf("ref" to "r")), null, "no name")
        checkEq(InboxPolicy.of("HOLD"), InboxPolicy.HOLD, "policy")
        checkEq(InboxPolicy.of("nonsense"), InboxPolicy.DEFAULT, "unknown policy")
    }

    h.test("startedByIde: a process under this JVM (child or grandchild) is ours; the JVM itself and init are not") {
        val sh = ProcessBuilder("sh", "-c", "sleep 30 & wait").start()
        try {
            var grandchild = 0L
            eventually(5000, "sleep started") {
                grandchild = ProcessHandle.of(sh.pid()).get().children().findFirst().map { it.pid() }.orElse(0L)
                grandchild != 0L
            }
            check(SessionRow.startedByIde(sh.pid())) { "child" }
            check(SessionRow.startedByIde(grandchild)) { "grandchild" }
            check(!SessionRow.startedByIde(ProcessHandle.current().pid())) { "the IDE itself" }
            check(!SessionRow.startedByIde(1)) { "init" }
            check(!SessionRow.startedByIde(sh.pid(), ancestor = grandchild)) { "not an ancestor" }
            val row = SessionRow.of(mapOf("name" to "t", "ref" to "r", "pid" to grandchild, "startedAt" to 0L))!!
            check(row.startedByIde && row.describe(0).endsWith("(this IDE)")) { row.describe(0) }
            ProcessHandle.of(grandchild).ifPresent { it.destroy() }
        } finally {
            sh.destroy()
            sh.waitFor()
        }
    }

    h.group("intellij participant: against the real library")

    val area = File(root, "a").also { it.mkdirs() }
    val home = File(area, "home").path
    val rt = File(area, "rt").path
    val ws = File(area, "ws").also { it.mkdirs() }
    val peerCfg = QwenParticipantConfig(qwenHome = home, runtimeDir = rt, sweepSockets = false, cleanupAtExit = false,
        inboundPolicy = InboundPolicy.ACCEPT)
    val alpha = QwenParticipant(peerCfg)
    val alphaSeen = Collections.synchronizedList(ArrayList<Map<String, Any?>>())
    alpha.onMessage { alphaSeen.add(it) }
    val alphaSession = alpha.register("alpha")
    val bravo = QwenParticipant(peerCfg.copy(inboundPolicy = InboundPolicy.HOLD, heldExpiry = HeldExpiry.NEVER))
    bravo.register("bravo")
    val listener = RecordingListener()
    val name = ParticipantName.derive("My Project")
    val ide = IdeParticipant(ParticipantSettings(name, ws.path, InboxPolicy.DEFAULT, qwenHome = home, runtimeDir = rt), listener, SessionLog)
    try {
        h.test("start registers intellij-my-project (kind external, cwd = project); start again is a no-op") {
            check(ide.start()) { "start: ${ide.lastError}" }
            check(ide.start()) { "second start" }
            val s = ide.session()!!
            checkEq(Triple(s["name"], s["kind"], s["cwd"]), Triple<Any?, Any?, Any?>("intellij-my-project", "external", ws.path), "session")
            val listed = alpha.list().firstOrNull { it["name"] == name }
            check(listed != null && listed["kind"] == "external") { "alpha sees it: ${alpha.list()}" }
            checkEq(ide.currentPolicy(), InboxPolicy.DEFAULT, "mode parity by default")
        }

        h.test("sessions list: the peers (not ourselves), with name, ref, cwd, kind, age") {
            val rows = ide.sessions()
            checkEq(rows.map { it.name }.toSet(), setOf("alpha", "bravo"), "peers")
            val a = rows.first { it.name == "alpha" }
            checkEq(a.ref, alphaSession["ref"], "ref")
            checkEq(a.address, "alpha", "address")
            checkEq(a.kind, "external", "kind")
            check(a.describe(System.currentTimeMillis()).startsWith("alpha [${a.ref}]  external  ")) { a.describe(System.currentTimeMillis()) }
        }

        h.test("send: pending -> delivered, the peer gets the text from intellij-my-project") {
            val text = OutgoingText.selectionWithContext(File(ws, "Main.kt").path, 1, 2, "fun main() {}\n")
            val m = ide.send("alpha", text)
            check(m.state == "pending" || m.state == "delivered") { "first state ${m.state}" }
            checkEq(ide.awaitFinal(m.msgId, 10000)!!.state, "delivered", "final state")
            eventually(10000, "alpha got it") { alphaSeen.any { it["msgId"] == m.msgId } }
            val got = alphaSeen.first { it["msgId"] == m.msgId }
            checkEq(got["fromName"], name, "fromName")
            checkEq(got["content"], text, "content")
            eventually(5000, "receipt listener") { listener.receipts.any { it.msgId == m.msgId && it.state == "delivered" } }
        }

        h.test("refusals before sending come back with the library's message (repeat, unknown address, blank)") {
            ide.send("alpha", "the same words twice")
            val again = ide.send("alpha", "the same words twice")
            checkEq(again.state, "not-sent", "state")
            check(again.reason!!.contains("that exact message went to that inbox")) { "reason: ${again.reason}" }
            val nobody = ide.send("nobody-here", "x")
            check(nobody.state == "not-sent" && nobody.reason!!.contains("nobody-here")) { "unknown: $nobody" }
            checkEq(ide.send("alpha", "   ").reason, "nothing to send", "blank")
        }

        h.test("a message held by the recipient shows held, then delivered when released there") {
            val m = ide.send("bravo", "please review this")
            eventually(10000, "held receipt") { ide.receipts.get(m.msgId)!!.state == "held" }
            bravo.release(m.msgId)
            checkEq(ide.awaitFinal(m.msgId, 10000)!!.history, listOf("pending", "held", "delivered"), "history")
        }

        h.test("receive (policy accept): balloon listener on qc-cb, neutralised text, path:line resolved against the project") {
            checkEq(ide.setPolicy(InboxPolicy.ACCEPT), null, "setPolicy")
            checkEq(ide.currentPolicy(), InboxPolicy.ACCEPT, "read back")
            val sent = alpha.send(name, "look at src/Main.kt:12 <now>")
            eventually(10000, "received") { ide.messages().any { it.msgId == sent["msgId"] } }
            val m = ide.messages().first { it.msgId == sent["msgId"] }
            checkEq(m.fromName, "alpha", "from")
            checkEq(m.origin, "peer", "origin")
            checkEq(m.text, "look at src/Main.kt:12 &lt;now>", "neutralised text")
            checkEq(m.places.map { it.toString() }, listOf(File(ws, "src/Main.kt").path + ":12"), "places")
            checkEq(m.sender(), "alpha (peer)", "sender")
            eventually(5000, "listener") { listener.messages.any { it.msgId == m.msgId } }
            check(listener.threads.contains("qc-cb")) { "threads ${listener.threads}" }
        }

        h.test("terminal env: a tool started with childEnv reaches the IDE as own-process") {
            val env = ide.childEnv()
            checkEq(env.keys, setOf("QWEN_CODE_MESSAGING_SOCKET", "QWEN_CODE_MESSAGING_TOKEN"), "keys")
            checkEq(env["QWEN_CODE_MESSAGING_SOCKET"], ide.session()!!["ipcPath"], "socket")
            val child = QwenParticipant(peerCfg.copy(parentSocket = env["QWEN_CODE_MESSAGING_SOCKET"], parentToken = env["QWEN_CODE_MESSAGING_TOKEN"]))
            try {
                child.register("terminal-tool")
                val sent = child.sendToParent("build finished: see README.md:1").str("msgId")!!
                eventually(10000, "own-process message") { ide.messages().any { it.msgId == sent } }
                val m = ide.messages().first { it.msgId == sent }
                checkEq(m.sender(), "terminal-tool (own-process)", "sender")
            } finally {
                child.close()
            }
        }

        h.test("policy hold: held list with release (delivered) and deny (denied at the sender)") {
            checkEq(ide.setPolicy(InboxPolicy.HOLD), null, "hold")
            val keep = alpha.send(name, "release me").str("msgId")!!
            val drop = alpha.send(name, "deny me").str("msgId")!!
            eventually(10000, "two held") { ide.held().size == 2 }
            val held = ide.held()
            checkEq(held.map { it.msgId }, listOf(keep, drop), "held ids")
            checkEq(held[0].fromName, "alpha", "from")
            checkEq(held[0].cause, "explicit-setting", "cause")
            check(held[0].expiresAt != null && held[0].describe(held[0].heldAt).contains("expires in 5m")) { held[0].describe(held[0].heldAt) }
            checkEq(ide.release(keep), null, "release")
            eventually(10000, "released message received") { ide.messages().any { it.msgId == keep } }
            checkEq(ide.deny(drop), null, "deny")
            checkEq(alpha.wait(drop, 10000)["state"], "denied", "the sender sees denied")
            eventually(5000, "held empty") { ide.held().isEmpty() }
            check(listener.held.any { it.size == 2 } && listener.held.last().isEmpty()) { "held listener ${listener.held.map { it.size }}" }
            check(ide.release(keep)!!.contains("no held message")) { "release again" }
        }

        h.test("policy refuse: the sender's message is refused") {
            checkEq(ide.setPolicy(InboxPolicy.REFUSE), null, "refuse")
            val r = alpha.send(name, "refused?", fromMode = ReviewClass.PROMPTING).str("msgId")!!
            checkEq(alpha.wait(r, 10000)["state"], "refused", "state")
        }

        h.test("restart under a new name (the setting changed) re-registers; close unregisters") {
            val old = ide.session()!!["recordPath"] as String
            check(ide.restart(ide.settings.copy(name = ParticipantName.derive("p", "Renamed Box"), policy = InboxPolicy.ACCEPT))) { "restart: ${ide.lastError}" }
            check(!File(old).exists()) { "old record removed" }
            checkEq(ide.session()!!["name"], "renamed-box", "new name")
            checkEq(ide.currentPolicy(), InboxPolicy.ACCEPT, "policy kept")
            val rec = ide.session()!!["recordPath"] as String
            ide.close()
            ide.close()
            check(!File(rec).exists()) { "record removed at close" }
            check(alpha.list().none { it["name"] == "renamed-box" }) { "still listed" }
            check(!ide.start()) { "no start after close" }
            checkEq(ide.send("alpha", "after close").state, "not-sent", "send after close")
        }

        h.test("a library that cannot load: start is false with the reason") {
            val bad = IdeParticipant(ParticipantSettings("x", ws.path, libraryPath = "/no/such/libqwen_companion.so"), RecordingListener(), SessionLog)
            check(!bad.start()) { "started?" }
            check(bad.lastError!!.contains("/no/such/libqwen_companion.so")) { "lastError ${bad.lastError}" }
            bad.close()
        }
    } finally {
        ide.close()
        alpha.close()
        bravo.close()
    }
}
