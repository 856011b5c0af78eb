package qwen.companion.tests

import qwen.companion.Json
import qwen.companion.PluginCallException
import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import qwen.companion.intellij.core.plugins.Checklist
import qwen.companion.intellij.core.plugins.ChecklistItem
import qwen.companion.intellij.core.plugins.ConfigForm
import qwen.companion.intellij.core.plugins.Contributions
import qwen.companion.intellij.core.plugins.DocumentDrop
import qwen.companion.intellij.core.plugins.DropOutcome
import qwen.companion.intellij.core.plugins.FileCard
import qwen.companion.intellij.core.plugins.FileCards
import qwen.companion.intellij.core.plugins.HostBackend
import qwen.companion.intellij.core.plugins.KeyChord
import qwen.companion.intellij.core.plugins.Keybindings
import qwen.companion.intellij.core.plugins.MenuPlacement
import qwen.companion.intellij.core.plugins.PluginBackend
import qwen.companion.intellij.core.plugins.PluginConfigEntry
import qwen.companion.intellij.core.plugins.PluginManagerModel
import qwen.companion.intellij.core.plugins.PluginNotification
import qwen.companion.intellij.core.plugins.PluginUiModel
import qwen.companion.intellij.core.plugins.SelectOption
import qwen.companion.intellij.core.plugins.ToolResultView
import qwen.companion.intellij.core.plugins.ViewServer
import java.io.File
import java.util.Collections
import java.util.TimeZone

private val UI_FIXTURES = File("tests/plugins/fixtures").absoluteFile

/**
 * A plugin host in memory for the UI logic: "installs" a fixture folder by
 * copying its manifest to `<dir>/<id>/manifest.json`, lists entries with that
 * manifest, and answers calls with scripted results. Records every call.
 */
class FakeBackend(dir: File) : PluginBackend {
    override val pluginsDir: String = dir.path
    val calls: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    val enabled = LinkedHashMap<String, Boolean>()
    val lastErrors = HashMap<String, Map<String, Any?>>()
    var results: (String, String, Map<String, Any?>) -> Map<String, Any?> = { _, _, _ -> mapOf("content" to emptyList<Any?>()) }
    var visibleAnswer: (String) -> Boolean = { true }
    var failList: QwenCompanionException.Call? = null

    private fun manifestFile(id: String) = File(File(pluginsDir, id), "manifest.json")

    override fun list(): List<Map<String, Any?>> {
        calls.add("list")
        failList?.let { throw it }
        return enabled.keys.sorted().map { id ->
            val m = Json.parseObject(manifestFile(id).readText())
            mapOf("id" to id, "name" to m["name"], "version" to m["version"], "enabled" to enabled[id], "manifest" to m, "lastError" to lastErrors[id])
        }
    }

    override fun install(src: String): Map<String, Any?> {
        calls.add("install $src")
        val m = Json.parseObject(File(src, "manifest.json").readText())
        val id = m["id"] as String
        val replaced = enabled.containsKey(id)
        manifestFile(id).parentFile.mkdirs()
        manifestFile(id).writeText(Json.write(m))
        enabled[id] = enabled[id] ?: true
        return mapOf("id" to id, "name" to m["name"], "version" to m["version"], "replaced" to replaced)
    }

    override fun uninstall(id: String, removeData: Boolean): Map<String, Any?> {
        calls.add("uninstall $id $removeData")
        enabled.remove(id) ?: throw QwenCompanionException.Call("qc_plugin_host_uninstall", QcStatus.NOT_FOUND.code, "no plugin $id is installed")
        return mapOf("id" to id, "dataRemoved" to removeData)
    }

    override fun enable(id: String) {
        calls.add("enable $id")
        enabled[id] = true
    }

    override fun disable(id: String) {
        calls.add("disable $id")
        enabled[id] = false
    }

    override fun call(pluginId: String, tool: String, params: Map<String, Any?>, cwd: String?): Map<String, Any?> {
        calls.add("call $pluginId $tool ${Json.write(params)} $cwd")
        return results(pluginId, tool, params)
    }

    override fun visible(pluginId: String, cwd: String): Boolean {
        calls.add("visible $pluginId $cwd")
        return visibleAnswer(cwd)
    }

    override fun options(pluginId: String, configId: String): List<Map<String, Any?>> {
        calls.add("options $pluginId $configId")
        return listOf(mapOf("value" to "auto", "label" to "Auto"), mapOf("value" to "fast", "label" to "Fast"), mapOf("value" to "accurate", "label" to "Accurate"))
    }

    override fun setConfigValue(id: String, key: String, value: Any?) {
        calls.add("set $id $key ${Json.write(value)}")
    }

    override fun parseDocument(mime: String, data: ByteArray): Map<String, Any?> {
        calls.add("parse $mime ${data.size}")
        return mapOf("success" to true, "text" to String(data, Charsets.UTF_8))
    }

    override fun viewUrl(pluginId: String, viewId: String?): String {
        calls.add("viewUrl $pluginId $viewId")
        return "http://127.0.0.1:1/$pluginId/${viewId ?: "ui"}?cap=x"
    }
}

private fun fullManifestEntry(enabled: Boolean = true): Map<String, Any?> {
    val m = Json.parseObject(File(UI_FIXTURES, "full/manifest.json").readText())
    return mapOf("id" to m["id"], "name" to m["name"], "version" to m["version"], "enabled" to enabled, "manifest" to m)
}

fun intellijUiTests(h: Harness, root: File) {
    h.group("intellij plugin UI: keybindings")

    h.test("mod is meta on macOS and ctrl elsewhere; AWT strings and labels") {
        checkEq(Keybindings.parse("mod+shift+d", macOs = true).awt(), "shift meta D", "mac")
        checkEq(Keybindings.parse("mod+shift+d", macOs = false).awt(), "ctrl shift D", "linux")
        checkEq(Keybindings.parse("mod+shift+d", true).label(true), "⇧⌘D", "mac label")
        checkEq(Keybindings.parse("mod+shift+d", false).label(false), "Ctrl+Shift+D", "other label")
        checkEq(Keybindings.parse("Ctrl+Alt+F5", true), KeyChord(true, true, false, false, "F5"), "ctrl stays ctrl on mac")
        checkEq(Keybindings.parse("cmd+,", false).awt(), "meta COMMA", "cmd is meta, comma")
        checkEq(Keybindings.parse("option+enter", true).awt(), "alt ENTER", "option")
        checkEq(Keybindings.parse("mod+[", false).awt(), "ctrl OPEN_BRACKET", "bracket")
        checkEq(Keybindings.parse("mod++", false).awt(), "ctrl PLUS", "plus key")
        checkEq(Keybindings.parse(" shift + pageDown ", false).awt(), "shift PAGE_DOWN", "spaces, case")
        checkEq(Keybindings.parse("9", false).awt(), "9", "bare digit")
        check(Keybindings.isMac("Mac OS X") && !Keybindings.isMac("Linux") && !Keybindings.isMac(null)) { "isMac" }
        // the strings are what javax.swing.KeyStroke accepts
        for (s in listOf("mod+shift+d", "ctrl+alt+f5", "cmd+,", "mod+[", "alt+enter", "mod+pageup")) {
            for (mac in listOf(true, false)) {
                val awt = Keybindings.parse(s, mac).awt()
                check(javax.swing.KeyStroke.getKeyStroke(awt) != null) { "KeyStroke rejects '$awt' (from $s)" }
            }
        }
    }

    h.test("bad keybindings are refused with a reason") {
        for ((bad, why) in listOf("" to "empty", "mod+shift" to "no key", "mod+mod+d" to "twice", "ctrl+ctrl+x" to "twice",
                "hyper+d" to "unknown key", "mod+d+e" to "two keys", "mod+f25" to "unknown key", "mod+é" to "unknown key", "mod++d" to "empty part")) {
            val e = expectThrows<IllegalArgumentException>("'$bad'") { Keybindings.parse(bad, false) }
            check(e.message!!.contains(why)) { "'$bad': ${e.message}" }
        }
    }

    h.group("intellij plugin UI: manifest contributions")

    h.test("the full manifest: commands with their keybinding, menus, session action, configuration, parsers, views, panel, checklist") {
        val c = Contributions.collect(listOf(fullManifestEntry()))
        checkEq(c.problems, emptyList<String>(), "problems")
        checkEq(c.commands.map { Triple(it.tool, it.title, it.key) }, listOf(Triple("do_something", "Do one thing to the current project", "mod+shift+d")), "commands")
        checkEq(c.commands[0].actionId, "qwen.plugin.com.example.full.do_something", "action id")
        checkEq(c.menus.keys.toList(), listOf("session/context"), "menu locations")
        val mi = c.menus.getValue("session/context")[0]
        checkEq(Pair(mi.tool, mi.title), Pair("do_something", "Do one thing to this session"), "menu item")
        check(mi.actionId != c.commands[0].actionId) { "menu entry has its own action (its own title)" }
        checkEq(MenuPlacement.groupFor(mi.location), MenuPlacement.SESSION_CONTEXT_GROUP, "menu group")
        checkEq(MenuPlacement.groupFor("somewhere/else"), MenuPlacement.PLUGINS_GROUP, "unknown location")
        checkEq(c.sessionActions.map { Triple(it.tool, it.visibleTool, it.tooltip) }, listOf(Triple("do_something", "is_available", "Do one thing to the current project")), "session action")
        checkEq(c.configuration.getValue("com.example.full").map { Triple(it.id, it.type, it.defaultValue) },
            listOf(Triple("mode", "select", "auto"), Triple("verbose", "boolean", false), Triple("prefix", "string", ""), Triple("limit", "number", 20L)), "configuration")
        checkEq(c.configuration.getValue("com.example.full")[0].optionsTool, "list_modes", "optionsTool")
        checkEq(c.parserFor("TEXT/markdown")?.toolName, "parse_markdown", "parser (case-insensitive)")
        checkEq(c.parserFor("application/pdf"), null, "no pdf parser")
        checkEq(c.views.map { Triple(it.id, it.title, it.width) }, listOf(Triple("board", "Example Board", 380)), "views")
        checkEq(c.views[0].toolWindowId, "Qwen: Example Board (com.example.full/board)", "tool window id")
        checkEq(c.panels.map { it.title }, listOf("Example Panel"), "panel")
        check(c.isChecklist("com.example.full", "do_something") && !c.isChecklist("com.example.full", "is_available")) { "checklist tools ${c.checklistTools}" }
    }

    h.test("disabled and broken plugins contribute nothing; bad entries are reported, not thrown") {
        val broken = mapOf("id" to "x.broken", "enabled" to true, "tools" to emptyList<Any?>(), "error" to mapOf("code" to "broken_plugin", "message" to "does not validate"))
        val noManifest = mapOf("id" to "x.old", "enabled" to true)
        val m = mapOf(
            "name" to "Odd", "tools" to listOf(mapOf("name" to "t1")),
            "commands" to listOf(mapOf("tool" to "missing", "title" to "Nope"), "not an object"),
            "keybindings" to listOf(mapOf("command" to "t1", "key" to "mod+1")),
            "menus" to mapOf("session/context" to listOf(mapOf("tool" to "ghost"))),
            "sessionAction" to mapOf("tool" to "t1", "visibleTool" to "ghost"),
            "configuration" to listOf(mapOf("id" to "c", "type" to "color", "defaultValue" to "red"))
        )
        val odd = mapOf("id" to "x.odd", "enabled" to true, "manifest" to m)
        val c = Contributions.collect(listOf(fullManifestEntry(enabled = false), broken, noManifest, odd))
        checkEq(c.views, emptyList<Any?>(), "disabled plugin's views")
        // the keybinding of a tool without commands[] still makes an action (titled by the tool)
        checkEq(c.commands.map { Pair(it.tool, it.key) }, listOf(Pair("t1", "mod+1")), "commands")
        checkEq(c.sessionActions, emptyList<Any?>(), "session action with an unknown visibleTool")
        checkEq(c.menus, emptyMap<String, Any?>(), "menus")
        checkEq(c.configuration, emptyMap<String, Any?>(), "configuration")
        val p = c.problems.joinToString("\n")
        for (want in listOf("x.broken is broken: does not validate", "x.old: the library gave no manifest", "command 'Nope' names tool 'missing'",
                "menu 'session/context' names tool 'ghost'", "sessionAction.visibleTool names tool 'ghost'", "configuration 'c' has unknown type 'color'")) {
            check(p.contains(want)) { "problems lack '$want':\n$p" }
        }
    }

    h.group("intellij plugin UI: configuration")

    val modeEntry = PluginConfigEntry("com.example.full", "mode", "Mode", "select", "list_modes", "auto")

    h.test("select options: Auto first (value = default), plugin's options after, no duplicate Auto") {
        val raw = listOf(mapOf("value" to "auto", "label" to "Auto"), mapOf("value" to "fast", "label" to "Fast"), mapOf("value" to "accurate"),
            mapOf("value" to "fast", "label" to "Fast again"), mapOf("label" to "no value"))
        val o = ConfigForm.selectOptions(modeEntry, raw)
        checkEq(o, listOf(SelectOption("auto", "Auto", true), SelectOption("fast", "Fast", false), SelectOption("accurate", "accurate", false)), "options")
        // the library may give only the plugin's own options: Auto is still first
        checkEq(ConfigForm.selectOptions(modeEntry, listOf(mapOf("value" to "fast", "label" to "Fast"))).map { it.label }, listOf("Auto", "Fast"), "Auto added")
        checkEq(ConfigForm.selectOptions(modeEntry, emptyList()).map { it.label }, listOf("Auto"), "only Auto")
        checkEq(ConfigForm.indexOf(o, "accurate"), 2, "index of a value")
        checkEq(ConfigForm.indexOf(o, "auto"), 0, "the default is Auto")
        checkEq(ConfigForm.indexOf(o, "gone"), 0, "a value no longer offered -> Auto")
    }

    h.test("boolean / string / number parsing, formatting, stored values from state.json") {
        val b = PluginConfigEntry("p", "verbose", "Verbose output", "boolean", null, false)
        val s = PluginConfigEntry("p", "prefix", "Prefix", "string", null, "")
        val n = PluginConfigEntry("p", "limit", "Max items", "number", null, 20L)
        checkEq(ConfigForm.parse(b, " TRUE "), true as Any?, "true")
        checkEq(ConfigForm.parse(b, "false"), false as Any?, "false")
        check(expectThrows<IllegalArgumentException>("bool") { ConfigForm.parse(b, "yes") }.message!!.contains("Verbose output")) { "label in message" }
        checkEq(ConfigForm.parse(s, " keep spaces "), " keep spaces " as Any?, "string kept")
        checkEq(ConfigForm.parse(n, "42"), 42L as Any?, "integer")
        checkEq(ConfigForm.parse(n, "2.5"), 2.5 as Any?, "decimal")
        check(expectThrows<IllegalArgumentException>("nan") { ConfigForm.parse(n, "NaN") }.message!!.contains("not a number")) { "NaN" }
        expectThrows<IllegalArgumentException>("word") { ConfigForm.parse(n, "ten") }
        checkEq(ConfigForm.format(20.0), "20", "format whole double")
        checkEq(ConfigForm.format(null), "", "format null")
        val dir = File(root, "state").also { it.mkdirs() }
        checkEq(ConfigForm.storedValues(dir.path, "p"), emptyMap<String, Any?>(), "no state file")
        File(dir, "state.json").writeText("{\"plugins\":{\"p\":{\"enabled\":true,\"config\":{\"limit\":5}}}}")
        val stored = ConfigForm.storedValues(dir.path, "p")
        checkEq(ConfigForm.effective(n, stored), 5L as Any?, "stored value")
        checkEq(ConfigForm.effective(b, stored), false as Any?, "default")
        File(dir, "state.json").writeText("{corrupt")
        checkEq(ConfigForm.storedValues(dir.path, "p"), emptyMap<String, Any?>(), "corrupt file -> defaults")
    }

    h.group("intellij plugin UI: results")

    h.test("checklist: from the call's todos, else details.todos; text and escaped HTML") {
        val todos = listOf(mapOf("id" to "1", "content" to "Initialize repository", "status" to "completed"),
            mapOf("id" to "2", "content" to "Write <unit> tests", "status" to "in_progress"), mapOf("id" to "3", "content" to "Publish", "status" to "pending"))
        val v = ToolResultView.of("p", "t", mapOf("todos" to todos), mapOf("content" to listOf(mapOf("type" to "text", "text" to "ok"))), true)
        val items = v.checklist!!
        checkEq(items.map { it.status }, listOf("completed", "in_progress", "pending"), "statuses")
        checkEq(Checklist.text(items), "[x] Initialize repository\n[~] Write <unit> tests\n[ ] Publish\n1/3 done", "text")
        val html = v.html()
        check(html.contains("☑ <s>Initialize repository</s>") && html.contains("◐ <b>Write &lt;unit&gt; tests</b>") && html.contains("☐ Publish")) { html }
        check(!html.contains("<unit>")) { "unescaped: $html" }
        val fromDetails = ToolResultView.of("p", "t", emptyMap(), mapOf("content" to emptyList<Any?>(), "details" to mapOf("todos" to todos)), true)
        checkEq(fromDetails.checklist?.size, 3, "details.todos")
        checkEq(ToolResultView.of("p", "t", mapOf("todos" to todos), mapOf("content" to emptyList<Any?>()), false).checklist, null, "not a checklist tool")
        checkEq(Checklist.parse(listOf(mapOf("content" to "x", "status" to "weird"))), listOf(ChecklistItem("1", "x", "pending")), "unknown status -> pending, id from position")
        checkEq(Checklist.parse(listOf(mapOf("id" to "1"))), null, "no content")
        checkEq(Checklist.parse("nope"), null, "not a list")
    }

    h.test("file cards: absolute filePath with fileName (or its base name); text of content blocks") {
        checkEq(FileCards.of(mapOf("filePath" to "/tmp/a/../b/note.md", "fileName" to "Note")), FileCard("/tmp/b/note.md", "Note"), "card")
        checkEq(FileCards.of(mapOf("filePath" to "/tmp/report.pdf")), FileCard("/tmp/report.pdf", "report.pdf"), "base name")
        checkEq(FileCards.of(mapOf("filePath" to "relative.md")), null, "relative path")
        checkEq(FileCards.of(null), null, "no details")
        val v = ToolResultView.of("p", "write_note", emptyMap(), mapOf("content" to listOf(mapOf("type" to "text", "text" to "Generated"),
            mapOf("type" to "image", "mimeType" to "image/png", "data" to "AAAA")), "details" to mapOf("filePath" to "/tmp/x <1>.md")), false)
        checkEq(v.text, "Generated\n[image image/png]", "text")
        check(v.html().contains("x &lt;1&gt;.md") && v.html().contains("file:/tmp/x%20%3C1%3E.md")) { v.html() }
    }

    h.test("notification: params.view opens the view; viewId alone still names it") {
        val n = PluginNotification.of(mapOf("id" to 7L, "plugin" to "local.todo-quadrant", "capability" to "show_notification",
            "params" to mapOf("title" to "3 todos", "body" to "• a", "viewId" to "quadrant", "view" to mapOf("id" to "quadrant", "title" to "Todo Quadrant", "url" to "http://127.0.0.1:9/v?c=1"))))
        checkEq(n, PluginNotification("local.todo-quadrant", "3 todos", "• a", "quadrant", "Todo Quadrant", "http://127.0.0.1:9/v?c=1"), "with view")
        val bare = PluginNotification.of(mapOf("plugin" to "p", "params" to mapOf("body" to "b", "viewId" to "board")))
        checkEq(Triple(bare.title, bare.viewId, bare.viewUrl), Triple("p", "board", null), "viewId without view; title defaults to the plugin")
        checkEq(PluginNotification.of(mapOf("plugin" to "p")).viewId, null, "no params")
    }

    h.group("intellij plugin UI: model and manager (fake host)")

    val fb = FakeBackend(File(root, "fake").also { it.mkdirs() })
    val model = PluginUiModel(fb, visibleTtlMs = 1000, clock = { now })
    val seen = ArrayList<Contributions>()
    model.addListener { seen.add(it) }

    h.test("install -> views_changed reloads; runTool renders the checklist; disable removes contributions") {
        val mgr = PluginManagerModel(fb)
        val r = mgr.install(File(UI_FIXTURES, "full").path)
        check(r.ok && r.message == "Installed Full Example 1.2.0") { "install: $r" }
        check(model.onHostEvent(mapOf("type" to "views_changed"))) { "views_changed reloads" }
        check(!model.onHostEvent(mapOf("type" to "ui_push"))) { "ui_push does not" }
        check(PluginUiModel.reloads(mapOf("type" to "plugin_disabled")) && !PluginUiModel.reloads(mapOf("type" to "plugin_exit"))) { "reloads" }
        checkEq(model.contributions.views.size, 1, "views")
        checkEq(seen.size, 1, "listener")
        fb.results = { _, tool, _ -> if (tool == "do_something") mapOf("content" to listOf(mapOf("type" to "text", "text" to "steps")),
            "details" to mapOf("todos" to listOf(mapOf("id" to "1", "content" to "Inspect", "status" to "completed")))) else mapOf("content" to emptyList<Any?>()) }
        val (view, err) = model.runTool("com.example.full", "do_something", emptyMap(), "/w")
        checkEq(err, null, "error")
        checkEq(view!!.checklist?.map { it.content }, listOf("Inspect"), "checklist")
        check(fb.calls.contains("call com.example.full do_something {} /w")) { "calls ${fb.calls}" }
        checkEq(model.viewUrl(model.contributions.views[0]), "http://127.0.0.1:1/com.example.full/board?cap=x", "view url")
        checkEq(model.panelUrl(model.contributions.panels[0]), "http://127.0.0.1:1/com.example.full/ui?cap=x", "panel url")
        checkEq(model.findView("com.example.full", "board")?.title, "Example Board", "findView")
        check(mgr.setEnabled("com.example.full", false).ok) { "disable" }
        model.onHostEvent(mapOf("type" to "views_changed"))
        checkEq(model.contributions.views, emptyList<Any?>(), "no views when disabled")
        checkEq(mgr.rows().map { it.describe() }, listOf("Full Example 1.2.0 (com.example.full) — disabled"), "rows")
        mgr.setEnabled("com.example.full", true)
        model.reload()
    }

    h.test("session action visibility: probed once per folder within the TTL, failure hides it") {
        val action = model.contributions.sessionActions[0]
        fb.visibleAnswer = { cwd -> cwd == "/repo" }
        fb.calls.clear()
        checkEq(model.cachedVisible(action, "/repo"), null, "unknown before a probe")
        check(model.sessionActionVisible(action, "/repo")) { "repo" }
        check(model.sessionActionVisible(action, "/repo")) { "repo again" }
        check(!model.sessionActionVisible(action, "/plain")) { "plain" }
        checkEq(fb.calls.filter { it.startsWith("visible") }, listOf("visible com.example.full /repo", "visible com.example.full /plain"), "probes")
        checkEq(model.cachedVisible(action, "/repo"), true, "cached")
        now += 2000
        checkEq(model.cachedVisible(action, "/repo"), null, "stale after the TTL")
        fb.visibleAnswer = { throw PluginCallException("qc_plugin_host_visible", QcStatus.REFUSED.code, mapOf("kind" to "timeout", "message" to "slow")) }
        check(!model.sessionActionVisible(action, "/repo")) { "failing probe hides" }
    }

    h.test("a failing list keeps the contributions and says why; manager errors are sentences") {
        fb.failList = QwenCompanionException.Call("qc_plugin_host_list", QcStatus.IO.code, "state.json is corrupt")
        val before = model.contributions
        model.reload()
        check(model.contributions === before) { "kept" }
        checkEq(model.lastReloadError, "state.json is corrupt", "lastReloadError")
        fb.failList = null
        val mgr = PluginManagerModel(fb, TimeZone.getTimeZone("UTC"))
        val r = mgr.uninstall("no.such", false)
        check(!r.ok && r.message == "Cannot uninstall no.such: no plugin no.such is installed") { "$r" }
        fb.lastErrors["com.example.full"] = mapOf("message" to "exited 3 times within 60 s", "at" to 0L)
        checkEq(mgr.rows()[0].lastError, "exited 3 times within 60 s (at 1970-01-01 00:00:00)", "lastError")
        checkEq(mgr.rows()[0].stoppedByCrashes, false, "an exit is not a stop")
        fb.lastErrors["com.example.full"] = mapOf("message" to "disabled: it exited 3 times within 60 s", "at" to 0L)
        checkEq(mgr.rows()[0].describe(), "Full Example 1.2.0 (com.example.full) — stopped after crashes (Enable restarts it) — last error: disabled: it exited 3 times within 60 s (at 1970-01-01 00:00:00)", "stopped row")
        fb.lastErrors.remove("com.example.full")
        checkEq(mgr.lastError(mapOf("message" to "m")), "m", "without at")
        checkEq(mgr.lastError(null), null, "none")
    }

    h.test("drop: MIME from the name, parser from the manifest, outcome sentences") {
        val md = File(root, "drop.md").also { it.writeText("# Title\n") }
        val c = model.contributions
        val ok = DocumentDrop.handle(md, c, fb)
        check(ok is DropOutcome.Parsed && ok.text == "# Title\n" && ok.parser.pluginId == "com.example.full") { "$ok" }
        check(fb.calls.contains("parse text/markdown 8")) { "calls ${fb.calls}" }
        checkEq(DocumentDrop.handle(File(root, "x.pdf").also { it.writeText("%PDF") }, c, fb).message(), "x.pdf: no enabled plugin parses application/pdf", "no parser")
        checkEq(DocumentDrop.handle(File(root, "README"), c, fb).message(), "README: unknown file type", "unknown type")
        val dirMd = File(root, "folder.md").also { it.mkdirs() }
        checkEq((DocumentDrop.handle(dirMd, c, fb) as DropOutcome.Failed).reason, "not a regular file", "folder")
        checkEq(DocumentDrop.mimeType("A.MARKDOWN"), "text/markdown", "case")
        checkEq(DocumentDrop.mimeType("trailing."), null, "trailing dot")
    }

    h.group("intellij plugin UI: against the real plugin host")

    val host = QwenPluginHost(QwenPluginHostConfig(pluginsDir = File(root, "real-plugins").path))
    val real = HostBackend(host)
    try {
        h.test("manager: install, list, problems of an invalid manifest, disable/enable, uninstall") {
            val mgr = PluginManagerModel(real)
            checkEq(mgr.install(File(UI_FIXTURES, "full").path), qwen.companion.intellij.core.plugins.ManagerResult(true, "Installed Full Example 1.2.0"), "install")
            checkEq(mgr.install(File(UI_FIXTURES, "full").path).message, "Updated Full Example 1.2.0 (was 1.2.0)", "re-install")
            val bad = mgr.install(File(UI_FIXTURES, "invalid/tool-name-invalid").path)
            check(!bad.ok && bad.message.contains("/tools/0/name")) { "invalid manifest: $bad" }
            checkEq(mgr.rows().map { Pair(it.id, it.enabled) }, listOf(Pair("com.example.full", true)), "rows")
            check(mgr.setEnabled("com.example.full", false).ok) { "disable" }
            checkEq(mgr.rows()[0].enabled, false, "disabled")
            check(mgr.setEnabled("com.example.full", true).ok) { "enable" }
            val nf = mgr.setEnabled("no.such.plugin", true)
            check(!nf.ok && nf.message.startsWith("Cannot enable no.such.plugin: ")) { "$nf" }
        }

        h.test("manager: install from a .zip (manifest at the root); a file that is no zip is refused, nothing installed") {
            val mgr = PluginManagerModel(real)
            val zip = File(root, "hello.zip")
            java.util.zip.ZipOutputStream(zip.outputStream()).use { z ->
                for (name in listOf("manifest.json", "index.js")) {
                    z.putNextEntry(java.util.zip.ZipEntry(name))
                    z.write(File(UI_FIXTURES, "hello/$name").readBytes())
                    z.closeEntry()
                }
            }
            checkEq(mgr.install(zip.path), qwen.companion.intellij.core.plugins.ManagerResult(true, "Installed Hello Plugin 1.0.0"), "zip install")
            val notZip = File(root, "broken.zip").also { it.writeText("not a zip") }
            val r = mgr.install(notZip.path)
            check(!r.ok && r.message.startsWith("Cannot install ${notZip.path}: ")) { "$r" }
            checkEq(mgr.rows().map { it.id }, listOf("com.example.full", "com.example.hello"), "rows")
            check(mgr.uninstall("com.example.hello", true).ok) { "uninstall hello" }
        }

        // Contributions from the installed manifest file (the list gains `manifest` with the view server).
        val entry = fullManifestEntry()
        val c = Contributions.collect(listOf(entry))

        h.test("runTool on the real plugin: checklist from details.todos; file card of write_note") {
            val m = PluginUiModel(real)
            val ws = File(root, "ws-real").also { it.mkdirs() }
            val (v, e) = m.runTool("com.example.full", "do_something", emptyMap(), ws.path)
            checkEq(e, null, "error")
            checkEq(v!!.checklist, null, "no checklist before the contributions are known")
            val checklistView = ToolResultView.of("com.example.full", "do_something", emptyMap(),
                host.call("com.example.full", "do_something", emptyMap(), ws.path), c.isChecklist("com.example.full", "do_something"))
            checkEq(checklistView.checklist?.map { it.status }, listOf("completed", "in_progress", "pending"), "checklist")
            check(checklistView.checklist!![0].content.contains(ws.path)) { "cwd reached the plugin: ${checklistView.checklist}" }
            val (note, e2) = m.runTool("com.example.full", "write_note", mapOf("text" to "# hi", "fileName" to "n.md"), ws.path)
            checkEq(e2, null, "error")
            val card = note!!.fileCard!!
            checkEq(card.name, "n.md", "card name")
            checkEq(File(card.path).readText(), "# hi", "the file the card opens")
            val (_, bad) = m.runTool("com.example.full", "write_note", mapOf("text" to 3), ws.path)
            check(bad != null && bad.contains("schema")) { "schema error: $bad" }
        }

        h.test("options of the real optionsTool: Auto first, then Fast, Accurate") {
            val entryMode = c.configuration.getValue("com.example.full")[0]
            val o = ConfigForm.selectOptions(entryMode, real.options("com.example.full", "mode"))
            checkEq(o.map { Pair(it.label, it.value) }, listOf(Pair("Auto", "auto"), Pair("Fast", "fast"), Pair("Accurate", "accurate")), "options")
            real.setConfigValue("com.example.full", "mode", "fast")
            checkEq(ConfigForm.effective(entryMode, ConfigForm.storedValues(real.pluginsDir, "com.example.full")), "fast" as Any?, "stored value read back")
            real.setConfigValue("com.example.full", "mode", null)
            checkEq(ConfigForm.effective(entryMode, ConfigForm.storedValues(real.pluginsDir, "com.example.full")), "auto" as Any?, "reset to default")
        }

        h.test("drop on the real parser: text back; invalid UTF-8 -> the plugin's reason") {
            val md = File(root, "real.md").also { it.writeText("# Héllo\n") }
            val ok = DocumentDrop.handle(md, c, real)
            check(ok is DropOutcome.Parsed && ok.text == "# Héllo\n") { "$ok" }
            val bin = File(root, "bin.md").also { it.writeBytes(byteArrayOf(0xff.toByte(), 0)) }
            val bad = DocumentDrop.handle(bin, c, real)
            check(bad is DropOutcome.Failed && bad.reason == "the file is not UTF-8 text") { "$bad" }
        }

        h.test("view and panel URLs from the host's view server (started on first use); unknown or disabled -> NOT_FOUND") {
            val u = real.viewUrl("com.example.full", "board")
            check(u.startsWith("http://127.0.0.1:")) { "board url $u" }
            checkEq(real.viewUrl("com.example.full", "board"), u, "the running server is kept")
            val panel = real.viewUrl("com.example.full", null)
            check(panel.startsWith("http://127.0.0.1:") && panel != u) { "panel url $panel" }
            val views = host.views()
            checkEq((views["views"] as List<*>).map { (it as Map<*, *>)["url"] }, listOf<Any?>(u), "views() lists the same page")
            expectStatus(QcStatus.NOT_FOUND, "unknown view") { real.viewUrl("com.example.full", "no-such-view") }
            host.viewsStop()
            check(real.viewUrl("com.example.full", "board").startsWith("http://127.0.0.1:")) { "restarted after a stop" }
            ViewServer.setColorScheme(host, dark = true)
            checkEq(host.views()["colorScheme"], "dark", "scheme")
            ViewServer.setColorScheme(host, dark = false)
            checkEq(host.views()["colorScheme"], "light", "scheme back")
            real.disable("com.example.full")
            try {
                expectStatus(QcStatus.NOT_FOUND, "disabled plugin") { real.viewUrl("com.example.full", "board") }
            } finally {
                real.enable("com.example.full")
            }
        }

        h.test("the real list carries each manifest: the contributions are those of the fixture, plus lastError") {
            val listed = real.list()
            val fromList = Contributions.collect(listed)
            checkEq(fromList.problems, emptyList<String>(), "problems")
            checkEq(fromList, c, "contributions from list() == from the manifest file")
            check(listed[0].containsKey("lastError") && listed[0]["lastError"] == null) { "lastError ${listed[0]}" }
            checkEq(PluginManagerModel(real).rows()[0].lastError, null, "no last error")
        }

        h.test("a crash-looping plugin: the manager shows it disabled with the library's lastError") {
            val mgr = PluginManagerModel(real)
            check(mgr.install(File(UI_FIXTURES, "hostile/crash-loop").path).ok) { "install" }
            var row: qwen.companion.intellij.core.plugins.PluginRow? = null
            eventually(20000, "crash-loop breaker") {
                try {
                    real.call("test.hostile.crash-loop", "ping", emptyMap(), null)
                } catch (e: QwenCompanionException.Call) {
                }
                Thread.sleep(250) // paces the calls (each restarts the crashing plugin)
                row = mgr.rows().firstOrNull { it.id == "test.hostile.crash-loop" }
                row?.stoppedByCrashes == true
            }
            val r = row!!
            checkEq(r.enabled, true, "the user's flag stays")
            check(Regex("""^disabled: .* \(at \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\)$""").containsMatchIn(r.lastError!!)) { "lastError ${r.lastError}" }
            check(r.describe().contains(" — stopped after crashes (Enable restarts it) — last error: disabled: ")) { r.describe() }
            val call = expectThrows<PluginCallException>("call while stopped") { real.call("test.hostile.crash-loop", "ping", emptyMap(), null) }
            checkEq(call.kind, "disabled", "kind")
            check(mgr.setEnabled("test.hostile.crash-loop", true).ok) { "enable" }
            checkEq(mgr.rows().first { it.id == "test.hostile.crash-loop" }.describe().contains("stopped after crashes"), false, "Enable clears the breaker")
            check(mgr.uninstall("test.hostile.crash-loop", true).ok) { "uninstall" }
        }

        h.test("uninstall through the manager ends the plugin and removes it") {
            val mgr = PluginManagerModel(real)
            check(mgr.uninstall("com.example.full", true).message == "Uninstalled com.example.full and removed its data") { "uninstall" }
            checkEq(mgr.rows().map { it.id }, emptyList<String>(), "rows")
        }
    } finally {
        host.close()
    }
}

private var now = 1_000_000L
