package qwen.companion.tests

import qwen.companion.Json
import qwen.companion.QcPlatform
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenHealth
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import qwen.companion.intellij.core.CodePoints
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.DiffController
import qwen.companion.intellij.core.DiffDecisionSink
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffProposers
import qwen.companion.intellij.core.DiffSession
import qwen.companion.intellij.core.EditorDiagnostic
import qwen.companion.intellij.core.EditorModel
import qwen.companion.intellij.core.EditorSelection
import qwen.companion.intellij.core.EditorToolException
import qwen.companion.intellij.core.EditorTools
import qwen.companion.intellij.core.HealthText
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.Languages
import qwen.companion.intellij.core.LogRing
import qwen.companion.intellij.core.OpenEditorInfo
import qwen.companion.intellij.core.PluginHostManager
import qwen.companion.intellij.core.PluginHostSettings
import qwen.companion.intellij.core.PluginNotifier
import qwen.companion.intellij.core.PromptReference
import qwen.companion.intellij.core.PromptReference.LineRange
import qwen.companion.intellij.core.Severities
import java.io.File
import java.util.Collections
import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import javax.xml.parsers.DocumentBuilderFactory

private object EditorLog : HostLog {
    val lines: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun info(message: String) { lines.add("I $message") }
    override fun warn(message: String, error: Throwable?) { lines.add("W $message") }
    override fun error(message: String, error: Throwable?) { lines.add("E $message") }
}

/** The IDE as the editor tools see it, in memory; records every call. */
class FakeEditorModel : EditorModel {
    val calls: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    var diagnostics: List<EditorDiagnostic> = emptyList()
    var editors: List<OpenEditorInfo> = emptyList()
    var selection: EditorSelection? = null
    val existing: MutableSet<String> = Collections.synchronizedSet(HashSet<String>())

    override fun diagnostics(path: String?, minSeverity: String): List<EditorDiagnostic> {
        calls.add("diagnostics $path $minSeverity")
        return diagnostics
    }

    override fun openFile(path: String, line: Int?, column: Int?, endLine: Int?, endColumn: Int?) {
        calls.add("open $path $line:$column-$endLine:$endColumn")
        if (path !in existing) throw EditorToolException("no such file: $path")
    }

    override fun openEditors(): List<OpenEditorInfo> = editors.also { calls.add("editors") }

    override fun selection(): EditorSelection? = selection.also { calls.add("selection") }
}

private class NoDecisions : DiffDecisionSink {
    val calls: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun diffAccept(path: String, content: String?) { calls.add("accept $path") }
    override fun diffReject(path: String) { calls.add("reject $path") }
    override fun diffClosed(path: String) { calls.add("closed $path") }
}

private class ListPresenter : DiffPresenter {
    val shown: MutableList<DiffSession> = Collections.synchronizedList(ArrayList<DiffSession>())
    val closed: MutableList<Long> = Collections.synchronizedList(ArrayList<Long>())
    override fun show(session: DiffSession) { shown.add(session) }
    override fun currentText(session: DiffSession): String? = null
    override fun close(session: DiffSession) { closed.add(session.id) }
}

private fun diag(path: String, line: Int, severity: String, message: String = "m$line") =
    EditorDiagnostic(path, line, 1, line, 4, severity, message, "Inspection", null)

fun intellijEditorTests(h: Harness, dir: File, libPath: String?) {
    h.group("intellij: add to the prompt (reference text)")

    h.test("a file inside qwen's folder is @relative with a trailing space, no line break") {
        val r = PromptReference.build("/w/proj/src/app.py", "/w/proj", null, QcPlatform.Os.LINUX)
        checkEq(r.toString(), "Text(@src/app.py )", "file")
        val t = (r as PromptReference.Result.Text).text
        check(!t.contains('\n') && !t.contains('\r') && t.endsWith(" ")) { t }
        checkEq(PromptReference.build("/w/proj/a.py", "/w/proj/", null, QcPlatform.Os.MACOS).toString(), "Text(@a.py )", "root with a slash")
    }
    h.test("a line range is typed as words after the reference: (lines A-B) / (line A)") {
        checkEq(PromptReference.build("/w/p/src/app.py", "/w/p", LineRange(10, 20), QcPlatform.Os.LINUX).toString(), "Text(@src/app.py (lines 10-20) )", "range")
        checkEq(PromptReference.build("/w/p/app.py", "/w/p", LineRange(3, 3), QcPlatform.Os.LINUX).toString(), "Text(@app.py (line 3) )", "one line")
        expectThrows<IllegalArgumentException>("end before start") { LineRange(5, 4) }
        expectThrows<IllegalArgumentException>("line 0") { LineRange(0, 2) }
    }
    h.test("POSIX: every character that ends an @ reference gets a backslash") {
        val name = "my file(1)[x]{y};|*?\$`'\"#&<>!~,z.py"
        val r = PromptReference.build("/w/p/$name", "/w/p", null, QcPlatform.Os.LINUX) as PromptReference.Result.Text
        checkEq(r.text, "@my\\ file\\(1\\)\\[x\\]\\{y\\}\\;\\|\\*\\?\\\$\\`\\'\\\"\\#\\&\\<\\>\\!\\~\\,z.py ", "escaped")
        checkEq(PromptReference.escapePosix("a\tb"), "a\\\tb", "tab")
        checkEq(PromptReference.escapePosix("plain-name_1.kt"), "plain-name_1.kt", "nothing to escape")
    }
    h.test("outside qwen's folder (or no folder known): the absolute path") {
        checkEq(PromptReference.build("/elsewhere/x.py", "/w/p", null, QcPlatform.Os.LINUX).toString(), "Text(@/elsewhere/x.py )", "outside")
        checkEq(PromptReference.build("/w/pother/x.py", "/w/p", null, QcPlatform.Os.LINUX).toString(), "Text(@/w/pother/x.py )", "sibling prefix")
        checkEq(PromptReference.build("/w/p/x.py", null, null, QcPlatform.Os.LINUX).toString(), "Text(@/w/p/x.py )", "no cwd")
    }
    h.test("Windows: relative with backslashes, case-insensitive; a special character is refused with the reason") {
        checkEq(PromptReference.build("C:\\Work\\Proj\\src\\app.py", "c:\\work\\proj", LineRange(2, 5), QcPlatform.Os.WINDOWS).toString(),
            "Text(@src\\app.py (lines 2-5) )", "relative")
        checkEq(PromptReference.build("C:/Work/Proj/a.py", "C:\\Work\\Proj\\", null, QcPlatform.Os.WINDOWS).toString(), "Text(@a.py )", "forward slashes")
        val r = PromptReference.build("C:\\Work\\Proj\\my file (2).py", "C:\\Work\\Proj", null, QcPlatform.Os.WINDOWS)
        check(r is PromptReference.Result.Refused && r.reason.contains("a space") && r.reason.contains("'('") && r.reason.contains("Windows")) { r.toString() }
    }
    h.test("a path with a line break or control character is refused") {
        val r = PromptReference.build("/w/p/a\nb.py", "/w/p", null, QcPlatform.Os.LINUX)
        check(r is PromptReference.Result.Refused && r.reason.contains("line break")) { r.toString() }
        check(PromptReference.build("", "/w/p", null, QcPlatform.Os.LINUX) is PromptReference.Result.Refused) { "empty path" }
    }
    h.test("selectionLines: a selection ending at a line start does not take that line") {
        checkEq(PromptReference.selectionLines(3, 6, 1), LineRange(3, 5), "whole lines 3-5")
        checkEq(PromptReference.selectionLines(3, 6, 4), LineRange(3, 6), "into line 6")
        checkEq(PromptReference.selectionLines(4, 4, 1), LineRange(4, 4), "empty-ish on one line")
    }

    h.group("intellij: editor tools (fake IDE model)")

    h.test("the four capabilities, in order") {
        checkEq(EditorTools.CAPABILITIES, listOf("editor_diagnostics", "editor_open_file", "editor_open_editors", "editor_selection"), "names")
    }
    h.test("diagnostics: filtered by severity and path, shaped as the contract says") {
        val m = FakeEditorModel()
        m.diagnostics = listOf(diag("/p/a.py", 1, "error"), diag("/p/a.py", 2, "warning"), diag("/p/a.py", 3, "information"),
            diag("/p/a.py", 4, "hint"), diag("/p/b.py", 5, "error"), diag("/p/a.py", 6, "bogus"))
        val t = EditorTools(m, EditorLog, Executor { it.run() })
        val all = t.answer("editor_diagnostics", emptyMap())["diagnostics"] as List<*>
        checkEq(all.size, 5, "every known severity, every file")
        checkEq(all[0], mapOf("path" to "/p/a.py", "line" to 1, "column" to 1, "endLine" to 1, "endColumn" to 4, "severity" to "error",
            "message" to "m1", "source" to "Inspection"), "shape")
        val warn = t.answer("editor_diagnostics", mapOf("path" to "/p/a.py", "severity" to "warning"))["diagnostics"] as List<*>
        checkEq(warn.map { (it as Map<*, *>)["line"] }, listOf(1, 2), "a.py, warning and worse")
        checkEq(m.calls.last(), "diagnostics /p/a.py warning", "the model was asked for the path and floor")
        val e = expectThrows<EditorToolException>("bad severity") { t.answer("editor_diagnostics", mapOf("severity" to "fatal")) }
        check(e.message!!.contains("error, warning, information, hint")) { e.message!! }
        expectThrows<EditorToolException>("path not a string") { t.answer("editor_diagnostics", mapOf("path" to 3L)) }
    }
    h.test("Severities: IntelliJ's HighlightSeverity values onto error/warning/information/hint") {
        checkEq(listOf(400, 350, 300, 200, 10).map { Severities.ofIntellij(it) }, listOf("error", "warning", "warning", "information", "hint"), "mapping")
        checkEq(Severities.ORDER.map { Severities.ofIntellij(Severities.intellijFloor(it)) }, Severities.ORDER, "floors map back")
        checkEq(Severities.rank("nope"), -1, "unknown")
    }
    h.test("open file: opened true; a missing file is the model's error; bad numbers refused") {
        val m = FakeEditorModel()
        m.existing.add("/p/a.py")
        val t = EditorTools(m, EditorLog, Executor { it.run() })
        checkEq(t.answer("editor_open_file", mapOf("path" to "/p/a.py", "line" to 3L, "column" to 2L, "endLine" to 4L, "endColumn" to 1L)),
            mapOf<String, Any?>("opened" to true), "answer")
        checkEq(m.calls.last(), "open /p/a.py 3:2-4:1", "range passed")
        val e = expectThrows<EditorToolException>("missing") { t.answer("editor_open_file", mapOf("path" to "/p/none.py")) }
        check(e.message!!.contains("no such file")) { e.message!! }
        expectThrows<EditorToolException>("no path") { t.answer("editor_open_file", emptyMap()) }
        expectThrows<EditorToolException>("line 0") { t.answer("editor_open_file", mapOf("path" to "/p/a.py", "line" to 0L)) }
        expectThrows<EditorToolException>("fraction") { t.answer("editor_open_file", mapOf("path" to "/p/a.py", "line" to 1.5)) }
    }
    h.test("open editors and selection: shapes; no selection is null; unknown capability refused") {
        val m = FakeEditorModel()
        m.editors = listOf(OpenEditorInfo("/p/a.py", true, false, "Python"), OpenEditorInfo("/p/N.java", false, true, "JAVA"),
            OpenEditorInfo("/p/x.weird", false, false, "My Lang 2"), OpenEditorInfo("/p/y", false, false, null))
        val t = EditorTools(m, EditorLog, Executor { it.run() })
        checkEq(t.answer("editor_open_editors", emptyMap()), mapOf<String, Any?>("editors" to listOf(
            mapOf("path" to "/p/a.py", "active" to true, "dirty" to false, "language" to "python"),
            mapOf("path" to "/p/N.java", "active" to false, "dirty" to true, "language" to "java"),
            mapOf("path" to "/p/x.weird", "active" to false, "dirty" to false, "language" to "my-lang-2"),
            mapOf("path" to "/p/y", "active" to false, "dirty" to false))), "editors")
        checkEq(t.answer("editor_selection", emptyMap()), mapOf<String, Any?>("selection" to null), "nothing selected")
        m.selection = EditorSelection("/p/a.py", "ab\ncd", 1, 3, 2, 3)
        checkEq(t.answer("editor_selection", emptyMap()), mapOf<String, Any?>("selection" to mapOf("path" to "/p/a.py", "text" to "ab\ncd",
            "start" to mapOf("line" to 1, "column" to 3), "end" to mapOf("line" to 2, "column" to 3))), "selection")
        expectThrows<EditorToolException>("unknown") { t.answer("editor_format", emptyMap()) }
        checkEq(Languages.id("PLAIN_TEXT"), "plaintext", "plain text")
        checkEq(Languages.id(" "), null, "blank")
    }
    h.test("a full executor answers at once (busy), never throws on the callback thread") {
        val t = EditorTools(FakeEditorModel(), EditorLog, Executor { throw RejectedExecutionException("full") })
        t.handle(mapOf("id" to 1L, "capability" to "editor_selection", "params" to emptyMap<String, Any?>()))
        val pool = EditorTools.boundedExecutor()
        check(pool.queue.remainingCapacity() == 64 && pool.maximumPoolSize == 2) { "bounded pool: ${pool.queue.remainingCapacity()} ${pool.maximumPoolSize}" }
        pool.shutdown()
    }
    h.test("CodePoints: columns count characters, not UTF-16 units") {
        val text = "a\uD834\uDD1Eb\nxyz"
        checkEq(CodePoints.column(text, 0, 3), 3, "after the surrogate pair")
        checkEq(CodePoints.offset(text, 0, 4, 3), 3, "column 3 -> offset 3")
        checkEq(CodePoints.offset(text, 0, 4, 99), 4, "clamped to the line end")
        checkEq(CodePoints.column(text, 5, 7), 3, "second line")
    }

    h.group("intellij: health text, log ring, diffs")

    h.test("HealthText: a header, one line per check in order, detail indented; worst status") {
        val report = mapOf("library" to mapOf("version" to "0.1.0", "abi" to 1L, "platform" to "linux-x86_64"),
            "checks" to listOf(mapOf("id" to "library", "status" to "ok", "summary" to "0.1.0"),
                mapOf("id" to "node", "status" to "error", "summary" to "node not found", "detail" to "searched:\n/usr/bin")))
        checkEq(HealthText.format(report), "qwen-companion library 0.1.0 (ABI 1, linux-x86_64)\n[ok] library: 0.1.0\n[error] node: node not found\n      searched:\n      /usr/bin\n", "text")
        checkEq(HealthText.worst(report), "error", "worst")
        checkEq(HealthText.worst(mapOf("checks" to listOf(mapOf("status" to "off"), mapOf("status" to "warn")))), "warn", "warn")
    }
    h.test("LogRing: bounded, says how many lines it dropped, tee writes both") {
        val ring = LogRing(3) { 0L }
        val inner = Collections.synchronizedList(ArrayList<String>())
        val log = ring.tee(object : HostLog {
            override fun info(message: String) { inner.add(message) }
            override fun warn(message: String, error: Throwable?) { inner.add(message) }
            override fun error(message: String, error: Throwable?) { inner.add(message) }
        })
        for (i in 1..5) log.info("line $i")
        log.warn("two\nlines", null)
        checkEq(ring.snapshot().size, 3, "bounded")
        check(ring.text().startsWith("(3 older lines dropped") && ring.text().contains("WARN  two\n      lines")) { ring.text() }
        checkEq(inner.size, 6, "every line reached the inner log")
        expectThrows<IllegalArgumentException>("capacity 0") { LogRing(0) }
    }
    h.test("DiffProposers: the session label only when more than one CLI is connected") {
        val two = mapOf("clients" to 2L, "diffs" to listOf(mapOf("filePath" to "/p/a.py", "session" to mapOf("id" to "s", "label" to "CLI #2"))))
        checkEq(DiffProposers.label(two, "/p/a.py"), "CLI #2", "two clients")
        checkEq(DiffProposers.label(two, "/p/b.py"), null, "another path")
        checkEq(DiffProposers.label(two + ("clients" to 1L), "/p/a.py"), null, "one client")
        checkEq(DiffProposers.label(emptyMap(), "/p/a.py"), null, "empty report")
    }
    h.test("DiffController: the proposer in the title; rejectAll rejects each open diff once and closes its view") {
        val sink = NoDecisions()
        val presenter = ListPresenter()
        val dc = DiffController(sink, presenter, { null }, EditorLog) { p -> if (p.endsWith("a.py")) "CLI #2" else null }
        dc.onOpenDiff("/p/a.py", "x")
        dc.onOpenDiff("/p/b.py", "y")
        checkEq(presenter.shown.map { it.title }, listOf("Qwen Code: a.py (CLI #2)", "Qwen Code: b.py"), "titles")
        checkEq(dc.rejectAll(), 2, "rejected")
        checkEq(sink.calls.sorted(), listOf("reject /p/a.py", "reject /p/b.py"), "each CLI told")
        checkEq(presenter.closed.size, 2, "views closed")
        checkEq(dc.rejectAll(), 0, "nothing left")
        val failing = DiffController(sink, ListPresenter(), { null }, EditorLog) { throw IllegalStateException("no report") }
        failing.onOpenDiff("/p/c.py", "z")
        checkEq(failing.session("/p/c.py")?.proposer, null, "a failing report leaves the title plain")
    }

    h.group("intellij: plugin.xml")

    val resources = File("examples/intellij/src/main/resources")
    val sources = File("examples/intellij/src/main/kotlin")
    fun xml(name: String) = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(File(resources, "META-INF/$name")).documentElement
    fun actions(root: org.w3c.dom.Element): Map<String, org.w3c.dom.Element> {
        val out = LinkedHashMap<String, org.w3c.dom.Element>()
        val nodes = root.getElementsByTagName("action")
        for (i in 0 until nodes.length) {
            val e = nodes.item(i) as org.w3c.dom.Element
            out[e.getAttribute("id")] = e
        }
        return out
    }
    fun children(e: org.w3c.dom.Element, tag: String): List<org.w3c.dom.Element> {
        val out = ArrayList<org.w3c.dom.Element>()
        val nodes = e.getElementsByTagName(tag)
        for (i in 0 until nodes.length) out.add(nodes.item(i) as org.w3c.dom.Element)
        return out
    }
    val all = actions(xml("plugin.xml")) + actions(xml("qwen-terminal.xml"))

    h.test("Run Qwen Code: main toolbar (new and classic UI), Tools menu, Ctrl+Alt+Q / Cmd+Alt+Q, an icon that exists") {
        val run = all["Qwen.RunQwenCode"] ?: throw CheckFailed("Qwen.RunQwenCode is not registered")
        checkEq(children(run, "add-to-group").map { it.getAttribute("group-id") }.toSet(), setOf("ToolsMenu", "MainToolbarRight", "NavBarToolBar"), "groups")
        checkEq(children(run, "keyboard-shortcut").map { it.getAttribute("keymap") + "=" + it.getAttribute("first-keystroke") }.toSet(),
            setOf("\$default=control alt Q", "Mac OS X 10.5+=meta alt Q"), "shortcuts")
        check(File(resources, run.getAttribute("icon").trimStart('/')).isFile) { "icon ${run.getAttribute("icon")}" }
    }
    h.test("the new actions are registered where the user looks for them") {
        fun groups(id: String) = children(all[id] ?: throw CheckFailed("$id is not registered"), "add-to-group").map { it.getAttribute("group-id") }.toSet()
        check(groups("Qwen.AddFileToPrompt").containsAll(listOf("EditorPopupMenu", "ProjectViewPopupMenu"))) { "add file" }
        check("EditorPopupMenu" in groups("Qwen.AddSelectionToPrompt")) { "add selection" }
        for (id in listOf("Qwen.Health", "Qwen.ShowLog", "Qwen.Diff.CloseAll")) check(id in all) { "$id is not registered" }
        checkEq(children(all.getValue("Qwen.AddSelectionToPrompt"), "keyboard-shortcut").map { it.getAttribute("keymap") + "=" + it.getAttribute("first-keystroke") }.toSet(),
            setOf("\$default=control alt shift Q", "Mac OS X 10.5+=control alt shift Q"), "add-to-prompt shortcut")
    }
    h.test("no two of our actions share a keystroke in one keymap, none takes a macOS system chord; every class named exists in the sources") {
        // Cmd+Option+Esc (Force Quit), Cmd+Option+Shift+Q (Log Out), Cmd+Ctrl+Q (Lock Screen), Cmd+Q, Cmd+H, Cmd+Option+H, Cmd+Option+D.
        val macSystem = setOf("meta alt ESCAPE", "meta alt shift Q", "control meta Q", "meta Q", "meta H", "meta alt H", "meta alt D")
        val seen = HashMap<String, String>()
        for ((id, e) in all) {
            for (k in children(e, "keyboard-shortcut")) {
                val key = k.getAttribute("keymap") + "|" + k.getAttribute("first-keystroke")
                // Accept/Reject only act inside a Qwen diff; nothing else of ours shares their keys.
                val prev = seen.put(key, id)
                check(prev == null) { "$key is used by $prev and $id" }
                check(k.getAttribute("keymap") != "Mac OS X 10.5+" || k.getAttribute("first-keystroke") !in macSystem) { "$id takes the macOS system chord $key" }
            }
        }
        val text = sources.walkTopDown().filter { it.name.endsWith(".kt") }.joinToString("\n") { it.readText() }
        val named = HashSet<String>()
        for (root in listOf(xml("plugin.xml"), xml("qwen-terminal.xml"))) {
            val nodes = root.getElementsByTagName("*")
            for (i in 0 until nodes.length) {
                val el = nodes.item(i) as org.w3c.dom.Element
                for (attr in listOf("class", "implementation", "instance", "factoryClass")) if (el.hasAttribute(attr)) named.add(el.getAttribute(attr))
            }
        }
        check(named.size >= 20) { "only ${named.size} classes named" }
        for (fq in named) {
            val pkg = fq.substringBeforeLast('.')
            val cls = fq.substringAfterLast('.')
            check(Regex("class $cls\\b").containsMatchIn(text) && text.contains("package $pkg\n")) { "$fq is not declared in the plugin's sources" }
        }
    }

    h.group("intellij: health and open diffs against the library")

    val library = QwenCompanionLibrary.load(libPath)
    h.test("QwenHealth.report: the library's own check first, each check has id/status/summary") {
        val r = QwenHealth.report(library, qwen = "/nonexistent/qwen", node = "/nonexistent/node")
        checkEq((r["library"] as Map<*, *>)["version"], library.version, "version")
        val checks = r["checks"] as List<*>
        checkEq((checks.firstOrNull() as? Map<*, *>)?.get("id"), "library", "the first check")
        for (c in checks) {
            val m = c as Map<*, *>
            check(m["id"] is String && m["status"] in setOf("ok", "warn", "error", "off") && m["summary"] is String) { "check $m" }
        }
        val qwen = checks.map { it as Map<*, *> }.firstOrNull { it["id"] == "qwen" } ?: throw CheckFailed("no qwen check in $checks")
        checkEq(qwen["status"], "error", "a qwen that does not exist")
        check(HealthText.format(r).contains("[error] qwen:")) { HealthText.format(r) }
    }
    h.test("QwenHealth.report with a running companion and plugin host; openDiffs of a fresh companion") {
        val ws = File(dir, "ws").also { it.mkdirs() }
        val c = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(ws.path), ideName = "Test IDE", lockDir = File(dir, "locks").path), library)
        try {
            c.start()
            val ph = QwenPluginHost(QwenPluginHostConfig(pluginsDir = File(dir, "plugins").path), library)
            try {
                val ids = (QwenHealth.report(library, c, ph, null)["checks"] as List<*>).map { (it as Map<*, *>)["id"] }
                check(ids.containsAll(listOf("library", "lock_file", "clis", "plugin_mcp"))) { "checks $ids" }
            } finally {
                ph.close()
            }
            val diffs = c.openDiffs()
            checkEq((diffs["clients"] as Number).toInt(), 0, "no CLI")
            checkEq(diffs["diffs"], emptyList<Any?>(), "no diff")
        } finally {
            c.close()
        }
    }
    h.test("two CLIs: the second one's diff is titled with its label, health counts both; Close All rejects both and every CLI hears it") {
        val ws = File(dir, "ws3").also { it.mkdirs() }
        val a = File(ws, "a.py").also { it.writeText("a\n") }
        val b = File(ws, "b.py").also { it.writeText("b\n") }
        val presenter = ListPresenter()
        val host = CompanionHost(HostSettings(ideName = "Test IDE", roots = listOf(ws.path), lockDir = File(dir, "locks3").path, libraryPath = libPath),
            presenter, { p -> File(p).takeIf { it.isFile }?.readText() }, EditorLog)
        try {
            check(host.start()) { "start: ${host.lastError}" }
            val c = host.current!!
            val token = Json.parseObject(File(c.lockFilePath()).readText()).str("authToken")
            McpClient(c.port(), token).use { cl1 ->
                cl1.initialize()
                cl1.initialized()
                val s1 = cl1.openStream()
                cl1.callTool("openDiff", mapOf("filePath" to a.path, "newContent" to "A\n"))
                eventually(5000, "the first diff") { presenter.shown.size == 1 }
                checkEq(presenter.shown[0].title, "Qwen Code: a.py", "one CLI: no label")
                McpClient(c.port(), token).use { cl2 ->
                    cl2.initialize()
                    cl2.initialized()
                    cl2.openStream().use {
                        eventually(5000, "two clients") { (c.openDiffs()["clients"] as Number).toInt() == 2 }
                        cl2.callTool("openDiff", mapOf("filePath" to b.path, "newContent" to "B\n"))
                        eventually(5000, "the second diff") { presenter.shown.size == 2 }
                        check(Regex("Qwen Code: b\\.py \\(CLI #\\d+\\)").matches(presenter.shown[1].title)) { presenter.shown[1].title }
                        val clis = (host.health(null, null)["checks"] as List<*>).map { it as Map<*, *> }.first { it["id"] == "clis" }
                        checkEq((clis["count"] as Number).toInt(), 2, "the health report's CLI count (${clis["summary"]})")
                        checkEq(host.diffs.rejectAll(), 2, "rejected")
                        s1.awaitNotification("ide/diffRejected") { it["filePath"] == a.path }
                        s1.awaitNotification("ide/diffRejected") { it["filePath"] == b.path }
                        checkEq(presenter.closed.size, 2, "both views closed")
                        checkEq(a.readText() + b.readText(), "a\nb\n", "nothing written")
                    }
                }
                s1.close()
            }
        } finally {
            host.close()
        }
    }
    h.test("editor tools on the plugin MCP server: listed; a call reaches the fake IDE model; its error and a full pool reach the CLI as errors") {
        val m = FakeEditorModel()
        m.diagnostics = listOf(diag(File(dir, "ws/a.py").path, 2, "error", "undefined name 'x'"))
        val manager = PluginHostManager(
            PluginHostSettings(pluginsDir = File(dir, "plugins2").path, libraryPath = libPath, registerMcp = false,
                workspacePaths = listOf(File(dir, "ws").path), mcpLockDir = File(dir, "mcp-locks").path),
            object : PluginNotifier { override fun show(plugin: String, params: Map<String, Any?>) = true }, EditorLog)
        EditorTools(m, EditorLog).install(manager)
        // editor_selection answered by tools whose worker pool is full: the CLI gets "busy" at once.
        val busy = EditorTools(m, EditorLog, Executor { throw RejectedExecutionException("full") })
        manager.setCapability("editor_selection") { r -> busy.handle(r) }
        try {
            val mg = manager
            mg.host() ?: throw CheckFailed("host: ${mg.lastError}")
            val info = mg.mcpInfo!!
            val token = ((info["headers"] as Map<*, *>)["Authorization"] as String).removePrefix("Bearer ")
            McpClient((info["port"] as Number).toInt(), token).use { cl ->
                cl.initialize()
                cl.initialized()
                val tools = (cl.request("tools/list")["result"] as Map<*, *>)["tools"] as List<*>
                val names = tools.map { (it as Map<*, *>)["name"] }
                check(names.containsAll(listOf("editor-diagnostics", "editor-open-file", "editor-open-editors", "editor-selection"))) { "tools $names" }
                val r = cl.callTool("editor-diagnostics", emptyMap())
                check(Json.write(r).contains("undefined name") && m.calls.any { it.startsWith("diagnostics") }) { Json.write(r) }
                val missing = cl.callTool("editor-open-file", mapOf("path" to File(dir, "ws/none.py").path))
                check(Json.write(missing).contains("no such file") && Json.write(missing).contains("\"isError\":true")) { Json.write(missing) }
                val b = cl.callTool("editor-selection", emptyMap())
                check(Json.write(b).contains("busy") && Json.write(b).contains("\"isError\":true")) { Json.write(b) }
            }
        } finally {
            manager.close()
        }
    }
}
