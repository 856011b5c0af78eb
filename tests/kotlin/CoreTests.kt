package qwen.companion.tests

import qwen.companion.QcPlatform
import qwen.companion.Json
import qwen.companion.OpenDiffResult
import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.ContextSink
import qwen.companion.intellij.core.DiffController
import qwen.companion.intellij.core.DiffDecisionSink
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffSession
import qwen.companion.intellij.core.DiffState
import qwen.companion.intellij.core.EditorContextFeeder
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.SelectionText
import qwen.companion.intellij.core.TerminalEnv
import qwen.companion.intellij.core.TextPositions
import qwen.companion.intellij.core.WorkspaceRoots
import java.io.File
import java.util.Collections
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit

fun jsonTests(h: Harness) {
    h.group("json")
    h.test("round trip with escapes, unicode, numbers, nesting") {
        val v = mapOf("s" to "a\"b\\c\n\t\u0001 ✓ 𝄞 \u2028", "n" to 42L, "d" to 1.5, "neg" to -7L, "t" to true, "f" to false,
            "z" to null, "l" to listOf(1L, "x", emptyList<Any>(), emptyMap<String, Any>()))
        val text = Json.write(v)
        check(text.contains("\\u0001") && text.contains("\\u2028")) { text }
        checkEq(Json.parse(text), v, "round trip")
        checkEq(Json.parse(" {\"a\" : [ 1 , 2e2, \"\\u00e9\\ud834\\udd1e\" ] } "), mapOf("a" to listOf(1L, 200.0, "é𝄞")), "parse")
    }
    h.test("malformed input is rejected") {
        for (bad in listOf("", "{", "{\"a\"}", "[1,]", "tru", "\"x", "{} x", "01x", "\"\u0001\"")) {
            expectThrows<IllegalArgumentException>("parse '$bad'") { Json.parse(bad) }
        }
    }
}

private object QuietLog : HostLog {
    val lines: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun info(message: String) { lines.add("I $message") }
    override fun warn(message: String, error: Throwable?) { lines.add("W $message") }
    override fun error(message: String, error: Throwable?) { lines.add("E $message ${error ?: ""}") }
}

private class RecordingSink : ContextSink, DiffDecisionSink {
    val calls: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    var failWith: RuntimeException? = null
    private fun rec(s: String) {
        failWith?.let { throw it }
        calls.add(s)
    }
    override fun fileOpened(path: String) = rec("open $path")
    override fun fileFocused(path: String) = rec("focus $path")
    override fun fileClosed(path: String) = rec("close $path")
    override fun fileRenamed(oldPath: String, newPath: String) = rec("rename $oldPath -> $newPath")
    override fun setCursor(path: String?, line: Int, character: Int) = rec("cursor $path $line:$character")
    override fun setSelection(path: String?, text: String?) = rec("select $path ${text?.length}")
    override fun diffAccept(path: String, content: String?) = rec("accept $path $content")
    override fun diffReject(path: String) = rec("reject $path")
    override fun diffClosed(path: String) = rec("closed $path")
}

/** A diff "view" kept in memory: the test plays the user. */
private class FakePresenter : DiffPresenter {
    val shown = LinkedBlockingQueue<DiffSession>()
    val edited = ConcurrentHashMap<Long, String>()
    val closed: MutableSet<Long> = Collections.synchronizedSet(HashSet<Long>())
    var refuse: RuntimeException? = null
    @Volatile var disposed = false
    override fun show(session: DiffSession) {
        refuse?.let { throw it }
        shown.add(session)
    }
    override fun currentText(session: DiffSession): String? = edited[session.id]
    override fun close(session: DiffSession) {
        closed.add(session.id)
    }
    override fun dispose() {
        disposed = true
    }
}

fun intellijCoreTests(h: Harness, dirs: TestDirs) {
    h.group("intellij core: pure helpers")

    h.test("TextPositions: 0-based editor offsets -> 1-based cursor") {
        checkEq(TextPositions.fromOffsets(0, 0, 0), TextPositions.Cursor(1, 1), "origin")
        checkEq(TextPositions.fromOffsets(4, 40, 43), TextPositions.Cursor(5, 4), "line 5")
        val text = "ab\n\tcd\r\nxyz"
        checkEq(TextPositions.fromText(text, 0), TextPositions.Cursor(1, 1), "0")
        checkEq(TextPositions.fromText(text, 2), TextPositions.Cursor(1, 3), "end of line 1")
        checkEq(TextPositions.fromText(text, 5), TextPositions.Cursor(2, 3), "after tab+c (tab counts 1)")
        checkEq(TextPositions.fromText(text, 9), TextPositions.Cursor(3, 2), "after CRLF")
        expectThrows<IllegalArgumentException>("past end") { TextPositions.fromText(text, 99) }
    }

    h.test("SelectionText.cap keeps small text, cuts huge text above the limit, never splits a pair") {
        checkEq(SelectionText.cap("abc"), "abc", "small")
        val exact = "x".repeat(SelectionText.LIMIT + 1)
        checkEq(SelectionText.cap(exact), exact, "limit+1 untouched")
        val big = "x".repeat(SelectionText.LIMIT + 1) + "𝄞" + "y".repeat(1000)
        val cut = SelectionText.cap(big)
        check(cut.length > SelectionText.LIMIT && cut.length <= SelectionText.LIMIT + 2) { "len ${cut.length}" }
        check(!Character.isHighSurrogate(cut[cut.length - 1])) { "split pair" }
    }

    h.test("WorkspaceRoots.normalize: absolute, de-duplicated, no trailing slash, fallback") {
        checkEq(WorkspaceRoots.normalize(listOf("/a/b/", "rel", null, "/a/b", "/c", "")), listOf("/a/b", "/c"), "normalize")
        checkEq(WorkspaceRoots.normalize(listOf("rel"), "/base/"), listOf("/base"), "fallback")
        checkEq(WorkspaceRoots.normalize(emptyList(), null), emptyList<String>(), "empty")
        checkEq(WorkspaceRoots.normalize(listOf("/")), listOf("/"), "root stays")
    }

    h.test("TerminalEnv: applyTo passes values verbatim, shellLines follows the shell setting and the terminal's shell") {
        val target = mutableMapOf("PATH" to "/bin", "QWEN_CODE_IDE_SERVER_PORT" to "1")
        val ws = "C:\\a b;D:\\it's %x% \"q\"\nz"
        TerminalEnv.applyTo(target, mapOf("QWEN_CODE_IDE_SERVER_PORT" to "4242", "QWEN_CODE_IDE_WORKSPACE_PATH" to ws))
        checkEq(target, mapOf("PATH" to "/bin", "QWEN_CODE_IDE_SERVER_PORT" to "4242", "QWEN_CODE_IDE_WORKSPACE_PATH" to ws), "merged, verbatim")
        val env = linkedMapOf("B" to "it's", "A" to "x")
        checkEq(TerminalEnv.shellLines(env, "posix"), "export A='x'\nexport B='it'\\''s'\n", "posix")
        checkEq(TerminalEnv.shellLines(env, "auto", null, QcPlatform.Os.WINDOWS), "\$env:A = 'x'\n\$env:B = 'it''s'\n", "auto on Windows")
        checkEq(TerminalEnv.shellLines(env, "auto", "C:\\Windows\\System32\\cmd.exe", QcPlatform.Os.WINDOWS), "set \"A=x\"\nset \"B=it's\"\n", "the terminal's cmd")
        checkEq(TerminalEnv.shellLines(env, "auto", "/usr/bin/fish -l", QcPlatform.Os.LINUX), "set -gx A 'x'\nset -gx B 'it\\'s'\n", "the terminal's fish")
        checkEq(TerminalEnv.shellLines(env, "powershell", "/bin/bash", QcPlatform.Os.LINUX), "\$env:A = 'x'\n\$env:B = 'it''s'\n", "the setting wins")
        expectThrows<IllegalArgumentException>("bad name") { TerminalEnv.shellLines(mapOf("A B" to "x"), "posix") }
        expectThrows<IllegalArgumentException>("cmd and a line break") { TerminalEnv.shellLines(mapOf("A" to "x\ny"), "cmd") }
    }

    h.group("intellij core: EditorContextFeeder")

    h.test("maps events, converts positions, drops repeats and non-local paths") {
        val sink = RecordingSink()
        val f = EditorContextFeeder(sink, QuietLog)
        f.fileOpened(null)
        f.fileOpened("relative.txt")
        f.fileOpened("/w/a.kt")
        f.fileFocused("/w/a.kt")
        f.fileFocused("/w/a.kt") // repeat
        f.caretMoved("/w/a.kt", 0, 0)
        f.caretMoved("/w/a.kt", 0, 0) // repeat
        f.caretMoved("/w/a.kt", 9, 4)
        f.selectionChanged("/w/a.kt", "sel")
        f.selectionChanged("/w/a.kt", "sel") // repeat
        f.selectionChanged("/w/a.kt", "")
        f.caretMoved("/w/b.kt", -1, 0) // invalid
        f.fileClosed("/w/a.kt")
        checkEq(sink.calls, listOf("open /w/a.kt", "focus /w/a.kt", "cursor /w/a.kt 1:1", "cursor /w/a.kt 10:5",
            "select /w/a.kt 3", "select /w/a.kt null", "close /w/a.kt"), "calls")
    }

    h.test("folder rename/delete covers tracked files below it; file rename only when tracked") {
        val sink = RecordingSink()
        val f = EditorContextFeeder(sink, QuietLog)
        f.fileOpened("/w/pkg/a.kt")
        f.fileOpened("/w/pkg/sub/b.kt")
        f.fileOpened("/w/pkgx/c.kt")
        sink.calls.clear()
        f.fileRenamed("/w/pkg", "/w/lib", isDirectory = true)
        f.fileRenamed("/w/untracked.kt", "/w/u2.kt")
        f.fileRenamed("/w/pkgx/c.kt", "/w/pkgx/d.kt")
        checkEq(sink.calls, listOf("rename /w/pkg/a.kt -> /w/lib/a.kt", "rename /w/pkg/sub/b.kt -> /w/lib/sub/b.kt",
            "rename /w/pkgx/c.kt -> /w/pkgx/d.kt"), "calls")
        checkEq(f.trackedPaths().toSet(), setOf("/w/lib/a.kt", "/w/lib/sub/b.kt", "/w/pkgx/d.kt"), "tracked")
        sink.calls.clear()
        f.fileDeleted("/w/lib")
        f.fileDeleted("/w/pkgx/d.kt")
        checkEq(sink.calls, listOf("close /w/lib/a.kt", "close /w/lib/sub/b.kt", "close /w/pkgx/d.kt"), "deletes")
        checkEq(f.trackedPaths(), emptyList<String>(), "nothing tracked")
    }

    h.test("library errors never escape into IDE listeners") {
        val sink = RecordingSink()
        sink.failWith = QwenCompanionException.Call("qc_companion_set_cursor", QcStatus.NOT_FOUND.code, "no file has the focus")
        val f = EditorContextFeeder(sink, QuietLog)
        f.caretMoved("/w/a.kt", 1, 1)
        f.fileOpened("/w/a.kt")
        sink.failWith = IllegalStateException("bug")
        f.fileClosed("/w/a.kt")
    }

    h.group("intellij core: DiffController state machine")

    h.test("open -> accept reports once; later close/accept/reject are ignored") {
        val sink = RecordingSink()
        val p = FakePresenter()
        val d = DiffController(sink, p, { "ORIGINAL" }, QuietLog)
        checkEq(d.onOpenDiff("/w/a", "NEW"), OpenDiffResult.Shown as OpenDiffResult, "shown")
        val s = p.shown.poll()!!
        checkEq(s.originalText, "ORIGINAL", "original")
        checkEq(s.proposedText, "NEW", "proposed")
        check(s.accept("EDITED")) { "accept" }
        check(!s.viewClosed()) { "viewClosed after accept" }
        check(!s.reject()) { "reject after accept" }
        check(!s.accept(null)) { "second accept" }
        checkEq(sink.calls, listOf("accept /w/a EDITED"), "calls")
        checkEq(s.state, DiffState.ACCEPTED, "state")
        check(p.closed.contains(s.id)) { "view closed" }
        checkEq(d.openSessions().size, 0, "open sessions")
    }

    h.test("reject, and closing the view without deciding -> diffClosed") {
        val sink = RecordingSink()
        val p = FakePresenter()
        val d = DiffController(sink, p, { null }, QuietLog)
        d.onOpenDiff("/w/a", "1")
        p.shown.poll()!!.reject()
        d.onOpenDiff("/w/b", "2")
        val b = p.shown.poll()!!
        checkEq(b.originalText, null, "new file has no original")
        b.viewClosed()
        checkEq(sink.calls, listOf("reject /w/a", "closed /w/b"), "calls")
        checkEq(b.state, DiffState.CLOSED_BY_USER, "state")
    }

    h.test("CLI closeDiff returns the view's text, closes it, and later clicks are ignored") {
        val sink = RecordingSink()
        val p = FakePresenter()
        val d = DiffController(sink, p, { null }, QuietLog)
        d.onOpenDiff("/w/a", "PROPOSED")
        val s = p.shown.poll()!!
        p.edited[s.id] = "USER EDIT"
        checkEq(d.onCloseDiff("/w/a"), "USER EDIT", "text")
        checkEq(s.state, DiffState.CLOSED_BY_CLI, "state")
        check(p.closed.contains(s.id)) { "view closed" }
        check(!s.accept("x")) { "accept after CLI close" }
        s.viewClosed()
        checkEq(sink.calls, emptyList<String>(), "no decision reported")
        checkEq(d.onCloseDiff("/w/a"), null, "second closeDiff")
        d.onOpenDiff("/w/b", "PROPOSED B")
        checkEq(d.onCloseDiff("/w/b"), "PROPOSED B", "no edit -> proposed text")
    }

    h.test("a second openDiff for a path supersedes the first; a refusing view -> Refused") {
        val sink = RecordingSink()
        val p = FakePresenter()
        val d = DiffController(sink, p, { null }, QuietLog)
        d.onOpenDiff("/w/a", "1")
        val first = p.shown.poll()!!
        d.onOpenDiff("/w/a", "2")
        val second = p.shown.poll()!!
        checkEq(first.state, DiffState.SUPERSEDED, "first")
        check(p.closed.contains(first.id)) { "first view closed" }
        first.viewClosed()
        second.accept(null)
        checkEq(sink.calls, listOf("accept /w/a null"), "only the second reports")
        p.refuse = IllegalStateException("no window")
        val r = d.onOpenDiff("/w/c", "3")
        check(r is OpenDiffResult.Refused && r.message!!.contains("no window")) { "result $r" }
        checkEq(d.openSessions().size, 0, "nothing open")
    }

    h.test("closeAll closes views without reporting; a failing report is logged") {
        val sink = RecordingSink()
        val p = FakePresenter()
        val d = DiffController(sink, p, { null }, QuietLog)
        d.onOpenDiff("/w/a", "1")
        d.onOpenDiff("/w/b", "2")
        val a = p.shown.poll()!!
        val b = p.shown.poll()!!
        d.closeAll()
        checkEq(a.state, DiffState.DISPOSED, "a")
        checkEq(b.state, DiffState.DISPOSED, "b")
        check(p.closed.containsAll(listOf(a.id, b.id))) { "closed" }
        checkEq(sink.calls, emptyList<String>(), "no reports")
        d.onOpenDiff("/w/c", "3")
        sink.failWith = QwenCompanionException.Call("qc_companion_diff_accept", QcStatus.NOT_FOUND.code, "no open diff")
        check(p.shown.poll()!!.accept(null)) { "accept still transitions" }
    }

    h.group("intellij core: CompanionHost against the real library")

    val presenter = FakePresenter()
    val file = File(dirs.ws, "Main.java").also { it.writeText("class Main {}\n") }
    val host = CompanionHost(
        HostSettings(ideName = "IntelliJ IDEA (test)", roots = listOf(dirs.ws.path + "/", "relative"), lockDir = dirs.lockDir.path),
        presenter,
        { path -> File(path).takeIf { it.isFile }?.readText() },
        QuietLog
    )

    h.test("start: lock file with the normalised roots, env for terminals") {
        check(host.start()) { "start failed: ${host.lastError}" }
        check(host.start()) { "second start is a no-op" }
        val c = host.current!!
        val lock = Json.parseObject(File(c.lockFilePath()).readText())
        checkEq(lock["workspacePath"], dirs.ws.path, "workspacePath")
        checkEq(lock["ideName"], "IntelliJ IDEA (test)", "ideName")
        checkEq(host.terminalEnv()["QWEN_CODE_IDE_SERVER_PORT"], c.port().toString(), "env port")
    }

    h.test("editor events through the feeder reach the companion's context (1-based)") {
        host.feeder.fileOpened(file.path)
        host.feeder.fileFocused(file.path)
        host.feeder.caretMoved(file.path, 0, 6) // editor: line 0, column 6
        host.feeder.selectionChanged(file.path, "Main")
        val ctx = Json.parseObject(host.current!!.contextJson())
        @Suppress("UNCHECKED_CAST")
        val active = ctx.obj("workspaceState").list("openFiles")[0] as JsonObject
        checkEq(active["path"], file.path, "path")
        checkEq(active["cursor"], mapOf("line" to 1L, "character" to 7L), "cursor")
        checkEq(active["selectedText"], "Main", "selection")
    }

    h.test("CLI openDiff -> view; user edits + accepts -> ide/diffAccepted; closeDiff -> view text; close view -> diffClosed") {
        val c = host.current!!
        val token = Json.parseObject(File(c.lockFilePath()).readText()).str("authToken")
        McpClient(c.port(), token).use { cl ->
            cl.initialize()
            checkEq(cl.initialized(), 202, "initialized")
            val s = cl.openStream()
            s.awaitNotification("ide/contextUpdate")

            val r = cl.callTool("openDiff", mapOf("filePath" to file.path, "newContent" to "class Main { int x; }\n"))
            checkEq(r.list("content"), emptyList<Any?>(), "openDiff result")
            val session = presenter.shown.poll(5, TimeUnit.SECONDS) ?: throw CheckFailed("not shown")
            checkEq(session.originalText, "class Main {}\n", "original from disk")
            session.accept("class Main { int y; }\n")
            checkEq(s.awaitNotification("ide/diffAccepted") { it["filePath"] == file.path }["content"], "class Main { int y; }\n", "accepted content")

            cl.callTool("openDiff", mapOf("filePath" to file.path, "newContent" to "P\n"))
            val s2 = presenter.shown.poll(5, TimeUnit.SECONDS)!!
            presenter.edited[s2.id] = "P edited\n"
            val cr = cl.callTool("closeDiff", mapOf("filePath" to file.path, "suppressNotification" to true))
            checkEq(Json.parse((cr.list("content")[0] as Map<*, *>)["text"] as String), mapOf("content" to "P edited\n"), "closeDiff reply")
            check(presenter.closed.contains(s2.id)) { "view closed by closeDiff" }
            s2.viewClosed() // the window's dispose after the CLI closed it: no notification

            cl.callTool("openDiff", mapOf("filePath" to file.path, "newContent" to "Q\n"))
            val s3 = presenter.shown.poll(5, TimeUnit.SECONDS)!!
            s3.viewClosed()
            s.awaitNotification("ide/diffClosed") { it["filePath"] == file.path }
            Thread.sleep(200) // the behaviour under test: no second diffClosed within 200 ms
            checkEq(s.all().count { it["method"] == "ide/diffClosed" }, 1, "exactly one diffClosed")
        }
    }

    h.test("roots change rewrites the lock file") {
        host.updateRoots(listOf(dirs.ws.path, dirs.ws2.path))
        val lock = Json.parseObject(File(host.current!!.lockFilePath()).readText())
        checkEq(lock["workspacePath"], dirs.ws.path + File.pathSeparator + dirs.ws2.path, "workspacePath")
    }

    h.test("close: views closed, presenter disposed, lock file removed; idempotent; no restart") {
        val lockPath = File(host.current!!.lockFilePath())
        host.close()
        host.close()
        check(presenter.disposed) { "presenter disposed" }
        host.closed.get(10, TimeUnit.SECONDS) // freed off the closing thread
        check(!lockPath.exists()) { "lock file removed" }
        check(!host.isRunning) { "not running" }
        check(!host.start()) { "start after close" }
        checkEq(host.terminalEnv(), emptyMap<String, String>(), "env after close")
    }

    h.test("a host whose library cannot load reports why and stays stopped") {
        val bad = CompanionHost(HostSettings("X", listOf(dirs.ws.path), lockDir = dirs.lockDir.path, libraryPath = "/no/such/libqwen_companion.so"),
            FakePresenter(), { null }, QuietLog)
        check(!bad.start()) { "started?" }
        check(bad.lastError!!.contains("/no/such/libqwen_companion.so")) { "lastError ${bad.lastError}" }
        bad.feeder.fileOpened(file.path) // no companion: silently nothing
        bad.close()
    }
}
