package qwen.companion.tests

import qwen.companion.HeldExpiry
import qwen.companion.InboundPolicy
import qwen.companion.InboundSettings
import qwen.companion.Json
import qwen.companion.LogLevel
import qwen.companion.Priority
import qwen.companion.QcStatus
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenParticipant
import qwen.companion.QwenParticipantConfig
import qwen.companion.RegisterOptions
import qwen.companion.ReviewClass
import java.io.File
import java.net.StandardProtocolFamily
import java.net.UnixDomainSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.SocketChannel
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import java.util.Collections
import java.util.UUID
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference

/** Collects what a handler receives, with the thread it ran on. */
private class Seen<T> {
    val items: MutableList<T> = Collections.synchronizedList(ArrayList<T>())
    val threads: MutableSet<String> = Collections.synchronizedSet(HashSet<String>())

    val handler: (T) -> Unit = { v ->
        items.add(v)
        threads.add(Thread.currentThread().name)
    }

    fun snapshot(): List<T> = synchronized(items) { ArrayList(items) }

    /** The first item matching [pred], waiting for it. */
    fun await(what: String, pred: (T) -> Boolean): T {
        var found: T? = null
        eventually(10000, "$what (got ${snapshot()})") {
            found = snapshot().firstOrNull(pred)
            found != null
        }
        return found!!
    }
}

/** Writes JSON lines to an inbox as any peer would, half-closes; true when the inbox closed its side. */
private fun rawSend(path: String, lines: List<Any?>): Boolean {
    SocketChannel.open(StandardProtocolFamily.UNIX).use { ch ->
        ch.connect(UnixDomainSocketAddress.of(path))
        val payload = StringBuilder()
        for (l in lines) payload.append(Json.write(l)).append('\n')
        val buf = ByteBuffer.wrap(payload.toString().toByteArray(Charsets.UTF_8))
        while (buf.hasRemaining()) ch.write(buf)
        ch.shutdownOutput()
        val r = ByteBuffer.allocate(64)
        return ch.read(r) == -1
    }
}

private fun userFrame(content: String): LinkedHashMap<String, Any?> {
    val m = LinkedHashMap<String, Any?>()
    m["msgV"] = 1
    m["msgId"] = UUID.randomUUID().toString()
    m["type"] = "user"
    m["fromName"] = "raw client"
    m["message"] = mapOf("role" to "user", "content" to content)
    return m
}

private fun perms(path: String): String = PosixFilePermissions.toString(Files.getPosixFilePermissions(File(path).toPath()))

fun sessionTests(h: Harness, root: File) {
    val lib = QwenCompanionLibrary.load()
    val pinnedBefore = QwenCompanion.pinnedCallbacks
    var areaN = 0
    val made = ArrayList<QwenParticipant>()

    /** A fresh private QWEN_HOME + runtime dir (short paths for sockets). */
    fun area(): File = File(root, "s${areaN++}").also { it.mkdirs() }

    fun cfg(area: File, base: QwenParticipantConfig = QwenParticipantConfig()): QwenParticipantConfig =
        base.copy(qwenHome = File(area, "home").path, runtimeDir = File(area, "rt").path, sweepSockets = false, cleanupAtExit = false)

    fun make(area: File, base: QwenParticipantConfig = QwenParticipantConfig()): QwenParticipant =
        QwenParticipant(cfg(area, base), lib).also { made.add(it) }

    h.group("sessions: library")

    h.test("every participant function is bound (load checks the symbols)") {
        val header = File("include/qwen_companion.h").readText()
        val declared = Regex("(?m)^[a-z].*?\\b(qc_participant_[a-z0-9_]+)\\(").findAll(header).map { it.groupValues[1] }.toSet()
        check(declared.contains("qc_participant_new") && declared.contains("qc_participant_set_held_callback")) { "header parse: $declared" }
        val bound = qwen.companion.QcNative::class.java.declaredMethods.map { it.name }.toSet()
        // Log lines as pulled events are for hosts without callbacks (LuaJIT);
        // this binding takes them through the log callback (NOT_BOUND in check_native.py).
        val forCallbackLessHosts = setOf("qc_participant_enable_log_events")
        checkEq((declared - bound - forCallbackLessHosts).sorted(), emptyList<String>(), "functions not in QcNative")
    }

    h.test("a library lacking functions is refused at load, naming them (fake lib built with cc)") {
        val dir = File(root, "fakemissing").also { it.mkdirs() }
        val c = File(dir, "fake.c").also { it.writeText("unsigned int qc_abi_version(void) { return 1; }\nconst char *qc_version(void) { return \"0.0.1\"; }\nvoid qc_string_free(char *s) { (void)s; }\n") }
        val so = File(dir, "libfake_missing.so")
        val cc = try {
            ProcessBuilder("cc", "-shared", "-fPIC", "-o", so.path, c.path).redirectErrorStream(true).start()
        } catch (e: java.io.IOException) {
            println("     (skipped: no C compiler: ${e.message})")
            return@test
        }
        val ccOut = String(cc.inputStream.readBytes())
        if (cc.waitFor() != 0) throw CheckFailed("cc failed: $ccOut")
        val e = expectThrows<QwenCompanionException.Load>("missing functions") { QwenCompanionLibrary.load(so.path) }
        val m = e.message!!
        check(m.contains("lacks functions") && m.contains("qc_participant_new") && m.contains("qc_companion_new") && m.contains(so.path)) { "message: $m" }
        check(!m.contains("qc_abi_version,") && !m.contains("qc_string_free,")) { "present functions listed: $m" }
    }

    h.group("sessions: config and errors")

    h.test("bad config -> INVALID_JSON (syntax, unknown field, bad value)") {
        expectStatus(QcStatus.INVALID_JSON, "syntax") { QwenParticipant.fromJson("{bad", lib).close() }
        val e = expectStatus(QcStatus.INVALID_JSON, "unknown field") { QwenParticipant.fromJson("{\"noSuchField\":1}", lib).close() }
        checkEq(e.function, "qc_participant_new", "function")
        check(e.detail.contains("noSuchField")) { "detail: ${e.detail}" }
        expectStatus(QcStatus.INVALID_JSON, "bad expiry") { QwenParticipant.fromJson("{\"heldExpiry\":\"2m\"}", lib).close() }
    }

    h.test("config JSON: reviewClass always sent (null = unknown), unset fields left out") {
        val j = Json.parseObject(QwenParticipantConfig(qwenHome = "/h", inboundPolicy = InboundPolicy.HOLD, heldExpiry = HeldExpiry.NEVER).toJson())
        checkEq(j, mapOf("qwenHome" to "/h", "inboundPolicy" to "hold", "reviewClass" to "prompting", "heldExpiry" to "never"), "json")
        val u = Json.parseObject(QwenParticipantConfig(reviewClass = null).toJson())
        check(u.containsKey("reviewClass") && u["reviewClass"] == null) { "unknown review class: $u" }
    }

    // ---- two participants: register, list, send, receipts, messages ------------------

    h.group("sessions: register, list, send")
    val ar = area()
    val receipts = Seen<JsonObject>()
    val messages = Seen<JsonObject>()
    val logs = Collections.synchronizedList(ArrayList<String>())
    val a = make(ar)
    a.onReceipt(receipts.handler)
    val b = make(ar, QwenParticipantConfig(inboundPolicy = InboundPolicy.ACCEPT))
    b.onMessage(messages.handler)
    b.setLogHandler({ level, msg -> logs.add("$level $msg") }, LogLevel.DEBUG)
    var sa: JsonObject = emptyMap()
    var sb: JsonObject = emptyMap()

    h.test("before register: no inbox, no sessions") {
        checkEq(a.ipcPath(), null, "ipcPath")
        checkEq(a.sessions(), emptyList<JsonObject>(), "sessions")
    }

    h.test("register publishes a 0600 record and a socket; list shows both, no tokens") {
        sa = a.register(RegisterOptions(name = "alpha", cwd = "/work/alpha"))
        sb = b.register("bravo")
        for (s in listOf(sa, sb)) {
            check(s.keys.containsAll(listOf("sessionId", "ref", "name", "kind", "cwd", "startedAt", "recordPath", "ipcPath"))) { "keys ${s.keys}" }
            checkEq(perms(s.str("recordPath")!!), "rw-------", "record mode")
            check(File(s.str("ipcPath")!!).exists()) { "socket ${s["ipcPath"]}" }
            checkEq(s.str("ref")!!.length, 6, "ref length")
        }
        checkEq(sa["name"], "alpha", "name")
        checkEq(sa["cwd"], "/work/alpha", "cwd")
        checkEq(sa["kind"], "external", "kind")
        checkEq(a.ipcPath(), sa["ipcPath"], "ipcPath")
        checkEq(a.sessions(), listOf(sa), "sessions")
        val listed = a.list()
        checkEq(listed.map { it["sessionId"] }.toSet(), setOf(sa["sessionId"], sb["sessionId"]), "listed ids")
        check(listed.all { it["reachable"] == true }) { "reachable: $listed" }
        check(!Json.write(listed).contains("ipcToken")) { "tokens listed" }
        val peers = a.peers(sa.str("sessionId"))
        checkEq(peers.map { it["address"] }, listOf("bravo"), "peers")
        checkEq(b.resolve("alpha")["sessionId"], sa["sessionId"], "resolve by name")
        checkEq(b.resolve("[${sa["ref"]}]")["sessionId"], sa["sessionId"], "resolve by [ref]")
        check(a.toString().contains("alpha")) { "toString ${a}" }
    }

    h.test("send by name: message (origin peer, qc-cb) and delivered receipt (qc-cb); wait/sendState") {
        val sent = a.send("bravo", "hello <b>kotlin</b>")
        checkEq(sent["address"], "bravo", "address")
        checkEq(sent["toSessionId"], sb["sessionId"], "toSessionId")
        val msgId = sent.str("msgId")!!
        val m = messages.await("message") { it["msgId"] == msgId }
        checkEq(m["content"], "hello <b>kotlin</b>", "content")
        checkEq(m["text"], "hello &lt;b>kotlin&lt;/b>", "text")
        checkEq(m["origin"], "peer", "origin")
        checkEq(m["fromName"], "alpha", "fromName")
        checkEq(m["sessionId"], sb["sessionId"], "sessionId")
        val r = receipts.await("receipt") { it["msgId"] == msgId }
        checkEq(r["status"], "delivered", "status")
        checkEq(r["previous"], "pending", "previous")
        checkEq(r.obj("frame")["origMsgId"], msgId, "receipt frame")
        checkEq(a.wait(msgId, 5000)["state"], "delivered", "wait")
        checkEq(a.sendState(msgId)["state"], "delivered", "sendState")
        checkEq(HashSet(messages.threads), hashSetOf("qc-cb"), "message threads")
        checkEq(HashSet(receipts.threads), hashSetOf("qc-cb"), "receipt threads")
    }

    h.test("send by [ref], bare ref and 'name [ref]', with fromMode and priority") {
        val ref = sb.str("ref")!!
        for (address in listOf("[$ref]", ref, "bravo [$ref]")) {
            val content = "by address $address"
            val sent = a.send(address, content, fromMode = ReviewClass.BYPASS, priority = Priority.NOW)
            val m = messages.await(content) { it["content"] == content }
            checkEq(m["fromMode"], "bypass", "fromMode")
            checkEq(m["priority"], "now", "priority")
            checkEq(a.wait(sent.str("msgId")!!)["state"], "delivered", "state for $address")
        }
    }

    h.test("errors: unknown -> NOT_FOUND, ambiguous -> INVALID_ARGUMENT, bad options -> INVALID_JSON") {
        val c1 = make(ar)
        c1.register("twin")
        val c2 = make(ar)
        c2.register("twin")
        val nf = expectStatus(QcStatus.NOT_FOUND, "unknown address") { a.send("nobody-here", "x") }
        checkEq(nf.function, "qc_participant_send", "function")
        expectStatus(QcStatus.NOT_FOUND, "resolve unknown") { a.resolve("nobody-here") }
        val amb = expectStatus(QcStatus.INVALID_ARGUMENT, "ambiguous") { a.send("twin", "which one?") }
        check(amb.detail.contains("twin")) { "detail: ${amb.detail}" }
        expectStatus(QcStatus.INVALID_ARGUMENT, "resolve ambiguous") { a.resolve("twin") }
        expectStatus(QcStatus.INVALID_JSON, "send options") { a.sendJson("{\"to\": 3}") }
        expectStatus(QcStatus.INVALID_JSON, "priority") { a.sendJson("{\"to\":\"bravo\",\"content\":\"x\",\"priority\":\"soon\"}") }
        expectStatus(QcStatus.INVALID_JSON, "inbound settings") { a.updateInboundJson(sa.str("sessionId")!!, "{\"policy\":\"maybe\"}") }
        expectStatus(QcStatus.NOT_FOUND, "sendState") { a.sendState("never-sent") }
        expectStatus(QcStatus.NOT_FOUND, "wait") { a.wait("never-sent", 10) }
        expectStatus(QcStatus.NOT_FOUND, "childEnv") { a.childEnv("no-such-session") }
        expectStatus(QcStatus.NOT_FOUND, "release") { b.release("never-held") }
        expectStatus(QcStatus.INVALID_ARGUMENT, "NUL in id") { b.deny("a\u0000b") }
        expectStatus(QcStatus.INVALID_ARGUMENT, "negative timeout") { a.wait("x", -1) }
        c1.close()
        c2.close()
    }

    h.test("a throwing message handler is contained and reported to the log handler") {
        val calls = Collections.synchronizedList(ArrayList<String>())
        b.onMessage { m ->
            calls.add(m["msgId"] as String)
            throw IllegalStateException("boom in onMessage")
        }
        val first = a.send("bravo", "first throw").str("msgId")!!
        val second = a.send("bravo", "second throw").str("msgId")!!
        eventually(10000, "both calls") { calls.size == 2 }
        checkEq(ArrayList(calls), listOf(first, second), "calls (the thread survived)")
        eventually(5000, "error logged") { synchronized(logs) { logs.any { it.startsWith("ERROR") && it.contains("boom in onMessage") } } }
        checkEq(a.wait(second)["state"], "delivered", "state")
        b.onMessage(messages.handler)
    }

    h.test("handlers can be removed: messages wait until one is set again") {
        b.onMessage(null)
        val sent = a.send("bravo", "queued while no handler").str("msgId")!!
        checkEq(a.wait(sent)["state"], "delivered", "accepted")
        Thread.sleep(200) // the behaviour under test: nothing is delivered within 200 ms
        check(messages.snapshot().none { it["msgId"] == sent }) { "delivered without a handler" }
        b.onMessage(messages.handler)
        messages.await("queued message") { it["msgId"] == sent }
    }

    // ---- hold, release, deny ------------------------------------------------------------

    h.group("sessions: hold, release, deny, inbound settings")
    val hr = area()
    val hReceipts = Seen<JsonObject>()
    val hMessages = Seen<JsonObject>()
    val hHeld = Seen<List<JsonObject>>()
    val x = make(hr)
    x.onReceipt(hReceipts.handler)
    val y = make(hr, QwenParticipantConfig(inboundPolicy = InboundPolicy.HOLD, heldExpiry = HeldExpiry.NEVER))
    y.onMessage(hMessages.handler)
    y.onHeld(hHeld.handler)
    x.register("xray")
    val sy = y.register("yankee")
    val syId = sy.str("sessionId")!!

    h.test("hold policy: held list and onHeld; release delivers; deny denies") {
        checkEq(y.inboundSettings(syId), InboundSettings(InboundPolicy.HOLD, ReviewClass.PROMPTING, HeldExpiry.NEVER), "settings")
        val first = x.send("yankee", "please hold me").str("msgId")!!
        val second = x.send("yankee", "deny me").str("msgId")!!
        eventually(10000, "two held") { y.held().size == 2 }
        val held = y.held()
        checkEq(held.map { it["msgId"] }, listOf(first, second), "held ids")
        checkEq(held[0]["cause"], "explicit-setting", "cause")
        checkEq(held[0]["content"], "please hold me", "content")
        checkEq(held[0]["sessionId"], syId, "sessionId")
        hHeld.await("onHeld with both") { it.size == 2 }
        checkEq(HashSet(hHeld.threads), hashSetOf("qc-cb"), "held threads")
        checkEq(hReceipts.await("held receipt") { it["msgId"] == first }["status"], "held", "receipt")
        checkEq(x.wait(first, 200)["state"], "held", "wait times out on a held message")
        checkEq(hMessages.snapshot(), emptyList<JsonObject>(), "nothing delivered yet")

        y.release(first)
        checkEq(hMessages.await("released") { it["msgId"] == first }["content"], "please hold me", "released content")
        checkEq(x.wait(first)["state"], "delivered", "released state")
        y.deny(second)
        checkEq(x.wait(second)["state"], "denied", "denied state")
        checkEq(hReceipts.await("denied receipt") { it["msgId"] == second && it["status"] == "denied" }["previous"], "held", "previous")
        checkEq(y.held(), emptyList<JsonObject>(), "buffer empty")
        hHeld.await("onHeld empty") { it.isEmpty() }
        check(hMessages.snapshot().none { it["msgId"] == second }) { "denied message delivered" }
        expectStatus(QcStatus.NOT_FOUND, "release again") { y.release(first) }
        expectStatus(QcStatus.NOT_FOUND, "deny again") { y.deny(second) }
    }

    h.test("updateInbound re-judges held messages (hold -> mode parity accepts a prompting sender)") {
        val sent = x.send("yankee", "held until the policy changes", fromMode = ReviewClass.PROMPTING).str("msgId")!!
        eventually(10000, "held") { y.held().size == 1 }
        y.updateInbound(syId, InboundSettings(null, ReviewClass.PROMPTING, HeldExpiry.FIVE_MINUTES))
        checkEq(hMessages.await("re-judged") { it["msgId"] == sent }["fromMode"], "prompting", "fromMode")
        checkEq(y.held(), emptyList<JsonObject>(), "buffer empty")
        checkEq(y.inboundSettings(syId), InboundSettings(null, ReviewClass.PROMPTING, HeldExpiry.FIVE_MINUTES), "settings")
        y.updateInbound(syId, InboundSettings(InboundPolicy.REFUSE))
        val refused = x.send("yankee", "refused outright").str("msgId")!!
        checkEq(x.wait(refused)["state"], "refused", "refused")
    }

    h.test("child env token: a raw client presenting it is origin own-process") {
        val env = y.childEnv(syId)
        checkEq(env.keys, setOf("QWEN_CODE_MESSAGING_SOCKET", "QWEN_CODE_MESSAGING_TOKEN"), "keys")
        checkEq(env["QWEN_CODE_MESSAGING_SOCKET"], sy["ipcPath"], "socket")
        val token = env.getValue("QWEN_CODE_MESSAGING_TOKEN")
        val recordToken = Json.parseObject(File(sy.str("recordPath")!!).readText()).str("ipcToken")
        check(token != recordToken && token.length >= 32) { "child token" }
        // An explicit policy applies to every origin: unset it, and make our
        // review class unknown, so a plain peer is held but an own process is not.
        y.updateInbound(syId, InboundSettings(null, null, HeldExpiry.FIVE_MINUTES))
        val frame = userFrame("from a tool the editor started")
        frame["x-unknown-field"] = mapOf("kept" to true)
        check(rawSend(env.getValue("QWEN_CODE_MESSAGING_SOCKET"), listOf(mapOf("msgV" to 1, "type" to "auth", "token" to token), frame))) { "inbox did not close" }
        val m = hMessages.await("own-process message") { it["msgId"] == frame["msgId"] }
        checkEq(m["origin"], "own-process", "origin")
        checkEq(m["content"], "from a tool the editor started", "content")
        checkEq(m.obj("frame"), Json.parseObject(Json.write(frame)), "frame exactly as received")
        val peer = userFrame("as a plain peer")
        rawSend(sy.str("ipcPath")!!, listOf(mapOf("msgV" to 1, "type" to "auth", "token" to recordToken), peer))
        eventually(10000, "peer held") { y.held().any { it["msgId"] == peer["msgId"] } }
        val h0 = y.held().first { it["msgId"] == peer["msgId"] }
        checkEq(h0["origin"], "peer", "peer origin")
        checkEq(h0["cause"], "mode-unknown", "cause")
    }

    h.test("manualAck: a delivered message stays queued until ack") {
        val ma = make(hr, QwenParticipantConfig(inboundPolicy = InboundPolicy.ACCEPT, manualAck = true))
        val seen = Seen<JsonObject>()
        ma.onMessage(seen.handler)
        ma.register("acker")
        val sent = x.send("acker", "ack me").str("msgId")!!
        seen.await("message") { it["msgId"] == sent }
        ma.ack(sent)
        expectStatus(QcStatus.NOT_FOUND, "second ack") { ma.ack(sent) }
        ma.close()
    }

    h.test("sendToParent: the child token makes the message own-process") {
        val env = y.childEnv(syId)
        val child = make(hr, QwenParticipantConfig(parentSocket = env["QWEN_CODE_MESSAGING_SOCKET"], parentToken = env["QWEN_CODE_MESSAGING_TOKEN"]))
        child.register("child")
        val sent = child.sendToParent("done with the task").str("msgId")!!
        val m = hMessages.await("parent message") { it["msgId"] == sent }
        checkEq(m["origin"], "own-process", "origin")
        val pinned = child.sendToParent("to that session", priority = Priority.NOW, toSessionId = syId).str("msgId")!!
        val m2 = hMessages.await("pinned parent message") { it["msgId"] == pinned }
        checkEq(m2.obj("frame")["toSessionId"], syId, "toSessionId")
        checkEq(m2["priority"], "now", "priority")
        child.close()
    }

    h.test("multiSession: rotate, unregister, unregisterAll") {
        val ms = make(hr, QwenParticipantConfig(multiSession = true))
        val s1 = ms.register("one")
        val s2 = ms.register("two")
        checkEq(s1["ipcPath"], s2["ipcPath"], "one inbox")
        val rotated = ms.rotateSessionId(s1.str("sessionId")!!, "fixed-new-id")
        checkEq(rotated["sessionId"], "fixed-new-id", "rotated id")
        checkEq(rotated["recordPath"], s1["recordPath"], "same record")
        ms.unregister(s2.str("sessionId")!!)
        check(!File(s2.str("recordPath")!!).exists()) { "record 2 removed" }
        expectStatus(QcStatus.NOT_FOUND, "unregister twice") { ms.unregister(s2.str("sessionId")!!) }
        ms.unregisterAll()
        checkEq(ms.sessions(), emptyList<JsonObject>(), "no sessions")
        checkEq(ms.ipcPath(), null, "no inbox")
        check(!File(s1.str("recordPath")!!).exists()) { "record 1 removed" }
        check(!ms.isClosed) { "handle stays valid" }
        ms.close()
    }

    // ---- teardown ---------------------------------------------------------------------

    h.group("sessions: close")

    h.test("close while another thread waits: the waiter returns; held messages expire") {
        val wr = area()
        val s = make(wr)
        val r = make(wr, QwenParticipantConfig(inboundPolicy = InboundPolicy.HOLD))
        s.register("sender")
        r.register("receiver")
        val sent = s.send("receiver", "waiting").str("msgId")!!
        eventually(10000, "held") { r.held().size == 1 }
        val result = AtomicReference<Any?>()
        val t = Thread {
            result.set(try { s.wait(sent, 10000)["state"] } catch (e: Throwable) { e })
        }
        t.start()
        // Kept: nothing observable tells that the waiter is blocked in
        // qc_participant_wait (the final state is the same either way).
        Thread.sleep(200)
        r.close()
        t.join(10000)
        check(!t.isAlive) { "waiter still blocked" }
        checkEq(result.get(), "expired", "waiter result")
        s.close()
    }

    h.test("close while one of its own calls waits: records go at once, the waiter returns, then the handle is freed") {
        val wr = area()
        val s = make(wr)
        val r = make(wr, QwenParticipantConfig(inboundPolicy = InboundPolicy.HOLD))
        val ss = s.register("sender")
        r.register("receiver")
        val sent = s.send("receiver", "waiting on a closing sender").str("msgId")!!
        eventually(10000, "held") { r.held().size == 1 }
        val result = AtomicReference<Any?>()
        val t = Thread {
            result.set(try { s.wait(sent, 30000)["state"] } catch (e: Throwable) { e })
        }
        t.start()
        // Kept: nothing observable tells that the waiter is blocked in
        // qc_participant_wait.
        Thread.sleep(200)
        val t0 = System.nanoTime()
        s.close()
        check(!File(ss.str("recordPath")!!).exists()) { "record still there while a call is in flight" }
        t.join(10000)
        check(!t.isAlive) { "waiter still blocked" }
        val waited = (System.nanoTime() - t0) / 1000000
        check(waited < 5000) { "waiter took $waited ms after close" }
        val res = result.get()
        check(res == "held" || (res is QwenCompanionException.Call && res.status == QcStatus.NOT_RUNNING)) { "waiter result: $res" }
        expectThrows<QwenCompanionException.Closed>("after close") { s.sessions() }
        r.close()
    }

    h.test("close from inside a handler; records removed; later calls -> Closed") {
        val cr = area()
        val s = make(cr)
        val r = make(cr, QwenParticipantConfig(inboundPolicy = InboundPolicy.ACCEPT))
        s.register("sender")
        val sr = r.register("closer")
        val done = CountDownLatch(1)
        val inside = AtomicReference<String>()
        r.onMessage { _ ->
            inside.set("sessions=${r.sessions().size}")
            r.close()
            r.close()
            done.countDown()
        }
        s.send("closer", "close yourself")
        check(done.await(10, TimeUnit.SECONDS)) { "handler did not run" }
        checkEq(inside.get(), "sessions=1", "calls inside the handler")
        eventually(5000, "record removed") { !File(sr.str("recordPath")!!).exists() }
        check(r.isClosed) { "isClosed" }
        expectThrows<QwenCompanionException.Closed>("after close") { r.sessions() }
        s.close()
    }

    h.test("close removes records and sockets, is idempotent; later calls -> Closed") {
        a.close()
        b.close()
        a.close()
        for (s in listOf(sa, sb)) {
            check(!File(s.str("recordPath")!!).exists()) { "record ${s["recordPath"]}" }
            check(!File(s.str("ipcPath")!!).exists()) { "socket ${s["ipcPath"]}" }
        }
        checkEq(File(File(ar, "home"), "sessions").list()?.toList() ?: emptyList<String>(), emptyList<String>(), "sessions dir")
        expectThrows<QwenCompanionException.Closed>("send after close") { a.send("bravo", "x") }
        expectThrows<QwenCompanionException.Closed>("register after close") { b.register("again") }
        checkEq(a.toString(), "QwenParticipant(closed)", "toString")
    }

    h.test("an unreferenced participant is freed by the Cleaner (record removed)") {
        val gr = area()
        var record: File? = null
        fun makeAndDrop() {
            val p = QwenParticipant(cfg(gr), lib)
            p.onMessage { }
            record = File(p.register("garbage").str("recordPath")!!)
        }
        makeAndDrop()
        check(record!!.isFile) { "record" }
        eventually(10000, "Cleaner to free the participant") {
            System.gc()
            !record!!.exists()
        }
    }

    for (p in made) p.close()
    h.test("every pinned callback is released once the participants are freed") {
        eventually(5000, "pinned callbacks back to $pinnedBefore (now ${QwenCompanion.pinnedCallbacks})") { QwenCompanion.pinnedCallbacks == pinnedBefore }
    }
}
