package qwen.companion.tests

import qwen.companion.Json
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.CompanionOptions
import qwen.companion.intellij.core.CompanionStatus
import qwen.companion.intellij.core.DiffController
import qwen.companion.intellij.core.DiffDecisionSink
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffSession
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.LineSeparators
import qwen.companion.intellij.core.OptionsForm
import qwen.companion.intellij.core.ParticipantNames
import qwen.companion.intellij.core.PendingWaits
import qwen.companion.intellij.core.RunQwen
import qwen.companion.intellij.core.SelectionText
import qwen.companion.intellij.core.SessionTracker
import qwen.companion.intellij.core.UiClosingException
import java.io.File
import java.util.Collections
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CountDownLatch
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference
import java.util.concurrent.locks.ReentrantReadWriteLock

private object NoLog : HostLog {
    override fun info(message: String) {}
    override fun warn(message: String, error: Throwable?) {}
    override fun error(message: String, error: Throwable?) {}
}

private class Decisions : DiffDecisionSink {
    val calls: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun diffAccept(path: String, content: String?) { calls.add("accept $path ${if (content == null) "null" else Json.write(content)}") }
    override fun diffReject(path: String) { calls.add("reject $path") }
    override fun diffClosed(path: String) { calls.add("closed $path") }
}

/** A view whose text is what an IntelliJ document would hold (`\n` only). */
private class DocumentPresenter : DiffPresenter {
    val shown = LinkedBlockingQueue<DiffSession>()
    val text = java.util.concurrent.ConcurrentHashMap<Long, String>()
    override fun show(session: DiffSession) {
        text[session.id] = LineSeparators.toLf(session.proposedText)
        shown.add(session)
    }
    override fun currentText(session: DiffSession): String? = text[session.id]
    override fun close(session: DiffSession) {}
}

/**
 * The plugin's presenter in miniature: show() posts to a "UI thread" (an
 * executor the test controls) and waits through [PendingWaits], exactly as
 * IntellijDiffPresenter does.
 */
private class UiPresenter(private val timeoutMs: Long, private val ui: (Runnable) -> Unit) : DiffPresenter {
    val waits = PendingWaits()
    val entered = CountDownLatch(1)
    override fun show(session: DiffSession) {
        entered.countDown()
        waits.await(timeoutMs) { f -> ui(Runnable { f.complete(Unit) }) }
    }
    override fun currentText(session: DiffSession): String? = null
    override fun close(session: DiffSession) {}
    override fun dispose() = waits.dispose()
}

/** A huge "document" that is never materialised: counts the chars read, refuses toString(). */
private class CountingChars(private val n: Int, private val at: (Int) -> Char) : CharSequence {
    val reads = AtomicInteger()
    override val length: Int get() = n
    override fun get(index: Int): Char {
        reads.incrementAndGet()
        if (index < 0 || index >= n) throw IndexOutOfBoundsException("$index")
        return at(index)
    }
    override fun subSequence(startIndex: Int, endIndex: Int): CharSequence = throw AssertionError("subSequence($startIndex, $endIndex) copies")
    override fun toString(): String = throw AssertionError("toString() copies the whole document")
}

private fun client(c: qwen.companion.QwenCompanion): McpClient {
    val token = Json.parseObject(File(c.lockFilePath()).readText()).str("authToken")
    val cl = McpClient(c.port(), token)
    cl.initialize()
    cl.initialized()
    return cl
}

/** Issue 12: the close hang, CRLF on Accept, the selection cap, and the new options/status/trust. */
fun intellijFixTests(h: Harness, dirs: TestDirs) {
    h.group("intellij core: UI waits and the close order")

    h.test("PendingWaits: success, the UI's own failure, timeout") {
        val w = PendingWaits()
        w.await(1000) { f -> Thread { f.complete(Unit) }.start() }
        expectThrows<IllegalStateException>("ui failure") { w.await(1000) { f -> f.completeExceptionally(IllegalStateException("no window")) } }
        expectThrows<TimeoutException>("timeout") { w.await(50) { } }
        checkEq(w.size, 0, "nothing left registered")
    }

    h.test("PendingWaits: dispose fails a running wait at once, and every later one before it registers") {
        val w = PendingWaits()
        val failed = AtomicReference<Throwable>()
        val t = Thread { try { w.await(20_000) { } } catch (e: Throwable) { failed.set(e) } }
        t.start()
        eventually(2000, "the wait to register") { w.size == 1 }
        val t0 = System.nanoTime()
        w.dispose()
        t.join(2000)
        check(!t.isAlive) { "the wait survived dispose()" }
        check(failed.get() is UiClosingException) { "got ${failed.get()}" }
        check((System.nanoTime() - t0) / 1_000_000 < 1000) { "slow" }
        var posted = false
        expectThrows<UiClosingException>("after dispose") { w.await(20_000) { posted = true } }
        check(!posted) { "nothing is posted to the UI after dispose" }
    }

    h.test("PendingWaits: dispose racing show never leaves a wait for its timeout (300 rounds)") {
        for (round in 0 until 300) {
            val w = PendingWaits()
            val go = CountDownLatch(1)
            val ended = CompletableFuture<Long>()
            val t = Thread {
                go.await()
                val t0 = System.nanoTime()
                try { w.await(10_000) { } } catch (e: Throwable) { }
                ended.complete((System.nanoTime() - t0) / 1_000_000)
            }
            t.start()
            go.countDown()
            if (round % 2 == 0) Thread.yield()
            w.dispose()
            val ms = ended.get(5, TimeUnit.SECONDS)
            check(ms < 2000) { "round $round: the wait lasted $ms ms after dispose" }
        }
    }

    h.test("project close while the callback thread waits for a read lock the closing thread holds: close() returns, the companion is freed after") {
        // Models IntelliJ: the UI thread disposes the project under the write lock;
        // the library's callback thread is inside openDiff reading the document.
        val rw = ReentrantReadWriteLock()
        val reading = CountDownLatch(1)
        val presenter = UiPresenter(20_000) { r -> r.run() }
        val host = CompanionHost(
            HostSettings("IntelliJ IDEA (test)", listOf(dirs.ws.path), lockDir = dirs.lockDir.path),
            presenter,
            { path ->
                reading.countDown()
                rw.readLock().lock() // what a read action does
                try { File(path).takeIf { it.isFile }?.readText() } finally { rw.readLock().unlock() }
            },
            NoLog
        )
        check(host.start()) { "start: ${host.lastError}" }
        val lock = File(host.current!!.lockFilePath())
        val cl = client(host.current!!)
        try {
            rw.writeLock().lock() // the "UI thread" starts disposing
            val call = Thread { try { cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "r.txt").path, "newContent" to "x")) } catch (e: Throwable) { } }
            call.start()
            check(reading.await(5, TimeUnit.SECONDS)) { "openDiff did not reach readOriginal" }
            val t0 = System.nanoTime()
            host.close() // on the thread holding the write lock
            val ms = (System.nanoTime() - t0) / 1_000_000
            check(ms < 1000) { "close() blocked $ms ms while holding the write lock (the IDE would hang)" }
            check(!host.closed.isDone) { "the companion cannot be freed while its callback waits" }
            rw.writeLock().unlock() // disposal done: the read finishes, the callback returns
            host.closed.get(10, TimeUnit.SECONDS)
            check(!lock.exists()) { "lock file removed" }
            call.join(10_000)
        } finally {
            if (rw.isWriteLockedByCurrentThread) rw.writeLock().unlock()
            cl.close()
            host.close()
        }
    }

    h.test("project close while show() waits for a busy UI thread: the wait ends at once and the companion is freed promptly") {
        val never = LinkedBlockingQueue<Runnable>() // the UI thread is busy disposing: nothing posted runs
        val presenter = UiPresenter(20_000) { r -> never.add(r) }
        val host = CompanionHost(HostSettings("IntelliJ IDEA (test)", listOf(dirs.ws.path), lockDir = dirs.lockDir.path),
            presenter, { null }, NoLog)
        check(host.start()) { "start: ${host.lastError}" }
        val lock = File(host.current!!.lockFilePath())
        val cl = client(host.current!!)
        try {
            val result = CompletableFuture<Map<String, Any?>>()
            Thread { try { result.complete(cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "s.txt").path, "newContent" to "x"))) } catch (e: Throwable) { result.completeExceptionally(e) } }.start()
            check(presenter.entered.await(5, TimeUnit.SECONDS)) { "show() not reached" }
            eventually(2000, "the wait to register") { presenter.waits.size == 1 }
            val t0 = System.nanoTime()
            host.close()
            host.closed.get(5, TimeUnit.SECONDS)
            val ms = (System.nanoTime() - t0) / 1_000_000
            check(ms < 3000) { "freeing took $ms ms (the show() wait held the callback thread)" }
            check(!lock.exists()) { "lock file removed" }
        } finally {
            cl.close()
        }
    }

    h.group("intellij core: line separators and the selection cap")

    h.test("LineSeparators: detect, toLf, fromLf") {
        checkEq(LineSeparators.detect("a\r\nb\n"), "\r\n", "crlf first")
        checkEq(LineSeparators.detect("a\nb\r\n"), "\n", "lf first")
        checkEq(LineSeparators.detect("a\rb"), "\r", "cr")
        checkEq(LineSeparators.detect("ab"), null, "none")
        checkEq(LineSeparators.detect(null), null, "null")
        checkEq(LineSeparators.toLf("a\r\nb\rc\n"), "a\nb\nc\n", "toLf")
        checkEq(LineSeparators.fromLf("a\nb\n", "\r\n"), "a\r\nb\r\n", "fromLf")
    }

    h.test("Accept keeps a CRLF file CRLF; an unchanged proposal is accepted without an edit") {
        val sink = Decisions()
        val p = DocumentPresenter()
        val original = "one\r\ntwo\r\n"
        val d = DiffController(sink, p, { original }, NoLog)
        d.onOpenDiff("/w/crlf.txt", "one\r\nTWO\r\n")
        val s = p.shown.poll()!!
        checkEq(s.lineSeparator, "\r\n", "the file's separator")
        check(s.acceptView(p.currentText(s)!!)) { "accepted" } // the view as shown: LF only
        checkEq(sink.calls.toList(), listOf("accept /w/crlf.txt null"), "unchanged = accept without edit")

        d.onOpenDiff("/w/crlf.txt", "one\r\nTWO\r\n")
        val s2 = p.shown.poll()!!
        s2.acceptView("one\nTWO\nthree\n") // the user typed a line in the editable side
        checkEq(sink.calls[1], "accept /w/crlf.txt " + Json.write("one\r\nTWO\r\nthree\r\n"), "edited text with CRLF")
    }

    h.test("the file's separator wins over the proposal's; a new file takes the proposal's; LF stays LF") {
        val sink = Decisions()
        val p = DocumentPresenter()
        val originals = mapOf("/w/lf.txt" to "a\nb\n", "/w/crlf.txt" to "a\r\nb\r\n")
        val d = DiffController(sink, p, { originals[it] }, NoLog)
        d.onOpenDiff("/w/crlf.txt", "a\nB\n") // the model wrote LF into a CRLF file
        p.shown.poll()!!.acceptView("a\nB!\n")
        d.onOpenDiff("/w/new.txt", "x\r\ny\r\n")
        val n = p.shown.poll()!!
        checkEq(n.originalText, null, "new file")
        n.acceptView("x\ny\nz\n")
        d.onOpenDiff("/w/lf.txt", "a\nc\n")
        p.shown.poll()!!.acceptView("a\nc!\n")
        checkEq(sink.calls.toList(), listOf(
            "accept /w/crlf.txt " + Json.write("a\r\nB!\r\n"),
            "accept /w/new.txt " + Json.write("x\r\ny\r\nz\r\n"),
            "accept /w/lf.txt " + Json.write("a\nc!\n")
        ), "decisions")
    }

    h.test("closeDiff returns the proposal when the view is unchanged, the edit with the file's separator otherwise") {
        val p = DocumentPresenter()
        val d = DiffController(Decisions(), p, { "k\r\nv\r\n" }, NoLog)
        d.onOpenDiff("/w/c.txt", "k\r\nV\r\n")
        p.shown.poll()!!
        checkEq(d.onCloseDiff("/w/c.txt"), "k\r\nV\r\n", "unchanged: the CLI's own text")
        d.onOpenDiff("/w/c.txt", "k\r\nV\r\n")
        val s = p.shown.poll()!!
        p.text[s.id] = "k\nV2\n"
        checkEq(d.onCloseDiff("/w/c.txt"), "k\r\nV2\r\n", "edited")
    }

    h.test("SelectionText.capFrom cuts by offsets without copying the selection (50 MB document)") {
        val n = 50 * 1024 * 1024
        val doc = CountingChars(n) { i -> ('a' + (i % 26)) }
        val cut = SelectionText.capFrom(doc, 10, n)!!
        checkEq(cut.length, SelectionText.LIMIT + 2, "cut length (over the limit: the library adds its marker)")
        check(doc.reads.get() <= SelectionText.LIMIT + 3) { "read ${doc.reads.get()} chars of a $n-char selection" }
        val small = "hello ✓ world"
        checkEq(SelectionText.capFrom(small, 6, 7), "✓", "small selection exact")
        checkEq(SelectionText.capFrom(small, 3, 3), null, "empty")
        val pair = CountingChars(SelectionText.LIMIT + 10) { i -> if (i == SelectionText.LIMIT + 1) '\uD834' else if (i == SelectionText.LIMIT + 2) '\uDD1E' else 'x' }
        val c2 = SelectionText.capFrom(pair, 0, pair.length)!!
        check(!Character.isHighSurrogate(c2[c2.length - 1])) { "split a surrogate pair" }
        val plain = "y".repeat(SelectionText.LIMIT * 2)
        checkEq(SelectionText.capFrom(plain, 5, plain.length), SelectionText.cap(plain.substring(5)), "same cut as cap()")
        expectThrows<IllegalArgumentException>("bad range") { SelectionText.capFrom(small, 5, 2) }
    }

    h.group("intellij core: options, status, trust")

    h.test("CompanionOptions: defaults valid; each bad value named; the presenter waits less than the library") {
        checkEq(CompanionOptions().problems(), emptyList<String>(), "defaults")
        val bad = CompanionOptions(runCommand = " ", debounceMs = -1, maxWaitMs = 70_000, requestTimeoutMs = 10, pluginsDir = "rel/dir", participantName = "a b")
        val p = bad.problems()
        checkEq(p.size, 6, "problems $p")
        check(CompanionOptions(runCommand = "qwen\nrm -rf /").problems().any { it.contains("one line") }) { "multi-line command" }
        check(CompanionOptions(debounceMs = 300, maxWaitMs = 100).problems().any { it.contains("Max wait") }) { "maxWait < debounce" }
        for (t in listOf(1_000L, 5_000L, 30_000L, 600_000L)) {
            val o = CompanionOptions(requestTimeoutMs = t)
            check(o.showTimeoutMs < t && o.showTimeoutMs >= t / 2) { "showTimeoutMs ${o.showTimeoutMs} for $t" }
        }
        check(CompanionOptions().pluginHostChanged(CompanionOptions(pluginsDir = "/p"))) { "pluginsDir change" }
        check(!CompanionOptions().pluginHostChanged(CompanionOptions(runCommand = "qwen --yolo"))) { "run command is not a host option" }
    }

    h.test("OptionsForm: round trip, blank numbers = defaults, every problem at once") {
        val o = CompanionOptions(runCommand = "qwen -m x", debounceMs = 30, requestTimeoutMs = 20_000, pluginsDir = "/plugins", participantName = "ij-x")
        checkEq(OptionsForm.of(o).parse().options, o, "round trip")
        val blank = OptionsForm.of(CompanionOptions()).copy(debounceMs = " ", maxWaitMs = "")
        checkEq(blank.parse().options, CompanionOptions(), "blank")
        val bad = OptionsForm.of(CompanionOptions()).copy(debounceMs = "fast", requestTimeoutMs = "1e3")
        val parsed = bad.parse()
        checkEq(parsed.options, null, "refused")
        checkEq(parsed.problems.size, 2, "problems ${parsed.problems}")
    }

    h.test("ParticipantNames and RunQwen") {
        checkEq(ParticipantNames.derive("IntelliJ", "My Project (2)"), "intellij-my-project-2", "derived")
        check(ParticipantNames.isValid(ParticipantNames.derive("x", "ü".repeat(100)))) { "always valid" }
        checkEq(ParticipantNames.derive("intellij", "a".repeat(100)).length, 64, "capped")
        val plan = RunQwen.plan(CompanionOptions(runCommand = "  qwen --debug "), dirs.ws.path)
        checkEq(plan.command, "qwen --debug", "command")
        checkEq(plan.workingDirectory, dirs.ws.path, "dir")
        checkEq(RunQwen.plan(CompanionOptions(), "/no/such/dir").workingDirectory, null, "missing dir: the terminal's default")
        checkEq(RunQwen.plan(CompanionOptions(), null).command, "qwen", "default command")
    }

    h.test("SessionTracker and CompanionStatus text") {
        val t = SessionTracker()
        val changes = AtomicInteger()
        t.onChange { changes.incrementAndGet() }
        check(t.onLog("session a1: connected, sending context")) { "connect" }
        t.onLog("session b2: connected, sending context")
        t.onLog("session a1: connected, sending context") // stream re-opened
        checkEq(t.connected, 2, "two")
        t.onLog("session a1: notification stream closed")
        checkEq(t.connected, 1, "one")
        check(!t.onLog("context update sent")) { "unrelated line" }
        t.onLog("stopped (port 4242)")
        checkEq(t.connected, 0, "stopped")
        checkEq(changes.get(), 4, "changes")
        checkEq(CompanionStatus(true, 1, 2, 0, null).text, "Qwen: 2 CLIs", "clis")
        checkEq(CompanionStatus(true, 1, 1, 1, null).text, "Qwen: 1 diff pending", "diff")
        checkEq(CompanionStatus(true, 1, 0, 0, null).text, "Qwen: ready", "ready")
        checkEq(CompanionStatus(false, null, 0, 0, "no lib").text, "Qwen: error", "error")
        check(CompanionStatus(false, null, 0, 0, "no lib").tooltip.contains("Last error: no lib")) { "tooltip" }
    }

    h.test("status against the real library: a connected CLI, a pending diff, then none") {
        val p = DocumentPresenter()
        val host = CompanionHost(HostSettings("IntelliJ IDEA (test)", listOf(dirs.ws.path), lockDir = dirs.lockDir.path), p, { null }, NoLog)
        check(host.start()) { "start: ${host.lastError}" }
        try {
            checkEq(host.status().connectedClis, 0, "none yet")
            client(host.current!!).use { cl ->
                val stream = cl.openStream()
                stream.awaitNotification("ide/contextUpdate")
                eventually(5000, "one connected CLI (${host.status()})") { host.status().connectedClis == 1 }
                cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "st.txt").path, "newContent" to "x\n"))
                val s = p.shown.poll(5, TimeUnit.SECONDS)!!
                checkEq(host.status().pendingDiffs, 1, "pending")
                checkEq(host.status().text, "Qwen: 1 diff pending", "text")
                s.reject()
                checkEq(host.status().pendingDiffs, 0, "decided")
                stream.close()
                eventually(5000, "the closed stream counted out (${host.status()})") { host.status().connectedClis == 0 }
            }
        } finally {
            host.close()
        }
    }

    h.test("workspace trust: the platform's state at start, then its changes") {
        val host = CompanionHost(HostSettings("IntelliJ IDEA (test)", listOf(dirs.ws.path), lockDir = dirs.lockDir.path, trusted = false),
            DocumentPresenter(), { null }, NoLog)
        check(host.start()) { "start: ${host.lastError}" }
        try {
            fun trusted() = (Json.parseObject(host.current!!.contextJson())["workspaceState"] as Map<*, *>)["isTrusted"]
            checkEq(trusted(), false, "untrusted project at start")
            host.setTrusted(true)
            checkEq(trusted(), true, "trusted later")
            host.setTrusted(false)
            checkEq(trusted(), false, "back to safe mode")
        } finally {
            host.close()
        }
        val later = CompanionHost(HostSettings("IntelliJ IDEA (test)", listOf(dirs.ws.path), lockDir = dirs.lockDir.path),
            DocumentPresenter(), { null }, NoLog)
        later.setTrusted(false) // before start: remembered
        check(later.start()) { "start" }
        try {
            checkEq((Json.parseObject(later.current!!.contextJson())["workspaceState"] as Map<*, *>)["isTrusted"], false, "remembered")
        } finally {
            later.close()
        }
    }
}
