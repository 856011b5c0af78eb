package qwen.companion.tests

import qwen.companion.CompanionCli
import qwen.companion.DiscoveryFiles
import qwen.companion.Json
import qwen.companion.QcStatus
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenHealth
import qwen.companion.intellij.core.AgentCli
import qwen.companion.intellij.core.AgentTerminals
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.CompanionOptions
import qwen.companion.intellij.core.CompanionStatus
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffSession
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.OptionsForm
import qwen.companion.intellij.core.RunAgent
import qwen.companion.intellij.core.Served
import java.io.File
import javax.xml.parsers.DocumentBuilderFactory

private val GEMINI_VARS = listOf("GEMINI_CLI_IDE_SERVER_PORT", "GEMINI_CLI_IDE_WORKSPACE_PATH", "GEMINI_CLI_IDE_PID")
private val QWEN_VARS = listOf("QWEN_CODE_IDE_SERVER_PORT", "QWEN_CODE_IDE_WORKSPACE_PATH")

/** The name Gemini CLI 0.61.0 looks for: `gemini-ide-server-<editor pid>-<port>.json`. */
private fun geminiName(port: Int) = "gemini-ide-server-${ProcessHandle.current().pid()}-$port.json"

/** The binding's side of serving Gemini CLI: the config's `cli`, `discoveryFiles()`, the terminal env, health. */
fun geminiBindingTests(h: Harness, dir: File) {
    h.group("binding: Gemini CLI (cli, discovery files)")
    val lib = QwenCompanionLibrary.load()
    val ws = File(dir, "ws").also { it.mkdirs() }

    h.test("CompanionCli: ids, case-insensitive lookup, what each serves; the config carries cli and geminiDir") {
        checkEq(CompanionCli.values().map { it.id }, listOf("qwen", "gemini", "both"), "ids")
        checkEq(CompanionCli.fromId(" Gemini "), CompanionCli.GEMINI, "lookup")
        checkEq(CompanionCli.fromId("claude"), null, "unknown")
        checkEq(CompanionCli.fromId(null), null, "null")
        check(CompanionCli.BOTH.servesQwen && CompanionCli.BOTH.servesGemini && !CompanionCli.QWEN.servesGemini && !CompanionCli.GEMINI.servesQwen) { "serves" }
        val j = Json.parseObject(QwenCompanionConfig(workspaceRoots = listOf("/w"), cli = CompanionCli.BOTH, geminiDir = "/g").toJson())
        checkEq(j["cli"], "both", "cli")
        checkEq(j["geminiDir"], "/g", "geminiDir")
        val d = Json.parseObject(QwenCompanionConfig().toJson())
        check(!d.containsKey("cli") && !d.containsKey("geminiDir")) { "defaults are left to the library: $d" }
    }

    h.test("DiscoveryFiles.parse: paths or null; anything else is refused") {
        checkEq(DiscoveryFiles.parse("{\"qwen\":\"/q.lock\",\"gemini\":null}"), DiscoveryFiles("/q.lock", null), "parsed")
        checkEq(DiscoveryFiles("/q", "/g").toMap(), mapOf("qwen" to "/q", "gemini" to "/g"), "map")
        checkEq(DiscoveryFiles(null, "/g").toMap(), mapOf("gemini" to "/g"), "served only")
        expectThrows<IllegalArgumentException>("a number") { DiscoveryFiles.parse("{\"qwen\":1}") }
    }

    h.test("an unknown cli is INVALID_ARGUMENT naming the value") {
        val e = expectStatus(QcStatus.INVALID_ARGUMENT, "cli claude") {
            QwenCompanion.fromJson("{\"workspaceRoots\":[${Json.write(ws.path)}],\"cli\":\"claude\"}", lib).close()
        }
        check(e.message?.contains("claude") == true) { "message: ${e.message}" }
    }

    h.test("cli both: one port and token in both files, every variable in the env; stop removes both; NOT_RUNNING after") {
        val lockDir = File(dir, "locks-both")
        val gemDir = File(dir, "gemini-both")
        val c = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(ws.path), ideName = "Kotlin Test IDE",
            lockDir = lockDir.path, cli = CompanionCli.BOTH, geminiDir = gemDir.path), lib)
        try {
            expectStatus(QcStatus.NOT_RUNNING, "before start") { c.discoveryFiles() }
            c.start()
            val port = c.port()
            val files = c.discoveryFiles()
            checkEq(files.qwen, File(lockDir, "$port.lock").path, "qwen lock file")
            checkEq(files.gemini, File(gemDir, geminiName(port)).path, "gemini discovery file")
            checkEq(c.lockFilePath(), files.qwen, "lockFilePath is still Qwen's")
            val q = Json.parseObject(File(files.qwen!!).readText())
            val g = Json.parseObject(File(files.gemini!!).readText())
            checkEq(g["port"], port.toLong(), "gemini port")
            checkEq(g["authToken"], q["authToken"], "one token")
            checkEq(g["workspacePath"], ws.path, "gemini workspacePath")
            check(g["ideInfo"] is Map<*, *>) { "gemini ideInfo: $g" }
            val env = c.terminalEnv()
            checkEq(env.keys, (QWEN_VARS + GEMINI_VARS).toSet(), "env keys")
            checkEq(env["GEMINI_CLI_IDE_SERVER_PORT"], port.toString(), "gemini port var")
            checkEq(env["GEMINI_CLI_IDE_PID"], ProcessHandle.current().pid().toString(), "gemini pid var")
            checkEq(env["GEMINI_CLI_IDE_WORKSPACE_PATH"], ws.path, "gemini workspace var")
            c.stop()
            check(!File(files.qwen).exists() && !File(files.gemini).exists()) { "files left after stop: $files" }
            expectStatus(QcStatus.NOT_RUNNING, "after stop") { c.discoveryFiles() }
        } finally {
            c.close()
        }
    }

    h.test("cli gemini: no Qwen lock file, lockFilePath is Gemini's file, only Gemini's variables; health has a gemini check") {
        val lockDir = File(dir, "locks-gem")
        val gemDir = File(dir, "gemini-only")
        val c = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(ws.path), lockDir = lockDir.path,
            cli = CompanionCli.GEMINI, geminiDir = gemDir.path), lib)
        try {
            c.start()
            val files = c.discoveryFiles()
            checkEq(files.qwen, null, "no qwen file")
            checkEq(files.gemini, File(gemDir, geminiName(c.port())).path, "gemini file")
            checkEq(c.lockFilePath(), files.gemini, "lockFilePath")
            check(lockDir.listFiles().orEmpty().none { it.name.endsWith(".lock") }) { "a qwen lock file was written" }
            checkEq(c.terminalEnv().keys, GEMINI_VARS.toSet(), "env keys")
            val checks = (QwenHealth.report(lib, c, gemini = "/nonexistent/gemini")["checks"] as List<*>).map { it as Map<*, *> }
            val gem = checks.firstOrNull { it["id"] == "gemini" } ?: throw CheckFailed("no gemini check in $checks")
            checkEq(gem["status"], "error", "a gemini that does not exist")
        } finally {
            c.close()
        }
    }

    h.test("health: the gemini check runs when cli asks for Gemini CLI, is off for a Qwen-only report") {
        fun gemini(cli: CompanionCli?) = (QwenHealth.report(lib, qwen = "/nonexistent/qwen", gemini = "/nonexistent/gemini", cli = cli)["checks"] as List<*>)
            .map { it as Map<*, *> }.firstOrNull { it["id"] == "gemini" } ?: throw CheckFailed("no gemini check for cli $cli")
        checkEq(gemini(CompanionCli.BOTH)["status"], "error", "both: a gemini that does not exist")
        checkEq(gemini(CompanionCli.QWEN)["status"], "off", "qwen only")
        checkEq(gemini(null)["status"], "off", "no companion, no cli: Qwen Code only")
    }
}

private object GeminiLog : HostLog {
    override fun info(message: String) {}
    override fun warn(message: String, error: Throwable?) {}
    override fun error(message: String, error: Throwable?) {}
}

private object NoPresenter : DiffPresenter {
    override fun show(session: DiffSession) {}
    override fun currentText(session: DiffSession): String? = null
    override fun close(session: DiffSession) {}
}

/** The IntelliJ plugin's side: the settings, Run Gemini CLI's plan and warning, the agent used last, the host, plugin.xml. */
fun intellijGeminiTests(h: Harness, dir: File, libPath: String?) {
    h.group("intellij: Gemini CLI")
    val ws = File(dir, "ws").also { it.mkdirs() }

    h.test("options: cli defaults to Qwen Code, gemini command checked, the companion restarts for cli and timing changes only") {
        checkEq(CompanionOptions().cli, CompanionCli.QWEN, "default cli")
        checkEq(CompanionOptions().geminiCommand, "gemini", "default command")
        check(CompanionOptions(geminiCommand = " ").problems().any { it.contains("Gemini CLI is empty") }) { "blank" }
        check(CompanionOptions(geminiCommand = "gemini\nrm -rf /").problems().any { it.contains("Gemini CLI must be one line") }) { "two lines" }
        check(CompanionOptions().companionChanged(CompanionOptions(cli = CompanionCli.BOTH))) { "cli change" }
        check(CompanionOptions().companionChanged(CompanionOptions(debounceMs = 10))) { "timing change" }
        check(!CompanionOptions().companionChanged(CompanionOptions(geminiCommand = "gemini -y", runCommand = "qwen -y", pluginsDir = "/p"))) { "commands and host options" }
        val o = CompanionOptions(cli = CompanionCli.GEMINI, geminiCommand = "gemini --yolo")
        checkEq(OptionsForm.of(o).parse().options, o, "form round trip")
        checkEq(OptionsForm.of(o).copy(geminiCommand = "  gemini -m x ").parse().options?.geminiCommand, "gemini -m x", "trimmed")
        checkEq(OptionsForm.of(o).copy(geminiCommand = "").parse().problems, listOf("The command to run Gemini CLI is empty."), "refused")
    }

    h.test("RunAgent: Gemini CLI's tab and command; the warning when the companion does not serve the agent") {
        val plan = RunAgent.plan(AgentCli.GEMINI, CompanionOptions(geminiCommand = " gemini -m flash "), ws.path)
        checkEq(Triple(plan.tabName, plan.command, plan.workingDirectory), Triple("Gemini CLI", "gemini -m flash", ws.path), "plan")
        checkEq(RunAgent.plan(AgentCli.QWEN, CompanionOptions(), null).command, "qwen", "qwen")
        checkEq(RunAgent.connectionWarning(AgentCli.GEMINI, CompanionCli.GEMINI), null, "gemini served")
        checkEq(RunAgent.connectionWarning(AgentCli.GEMINI, CompanionCli.BOTH), null, "both")
        checkEq(RunAgent.connectionWarning(AgentCli.QWEN, CompanionCli.QWEN), null, "qwen served")
        val w = RunAgent.connectionWarning(AgentCli.GEMINI, CompanionCli.QWEN) ?: throw CheckFailed("no warning for gemini with cli qwen")
        check(w.contains("Gemini CLI or Both") && w.contains("serves Qwen Code only")) { w }
        val q = RunAgent.connectionWarning(AgentCli.QWEN, CompanionCli.GEMINI) ?: throw CheckFailed("no warning for qwen with cli gemini")
        check(q.contains("Qwen Code or Both")) { q }
    }

    h.test("AgentTerminals: the reference goes to the terminal started, focused or selected last; an ended one is forgotten") {
        val t = AgentTerminals<String>()
        checkEq(t.target(), null, "none")
        t.started(AgentCli.QWEN, "q1")
        t.started(AgentCli.GEMINI, "g1")
        checkEq(t.target(), Pair(AgentCli.GEMINI, "g1"), "gemini started last")
        t.used(AgentCli.QWEN)
        checkEq(t.target(), Pair(AgentCli.QWEN, "q1"), "qwen focused last")
        checkEq(t.target("g1"), Pair(AgentCli.GEMINI, "g1"), "the selected tab wins")
        checkEq(t.lastUsed, AgentCli.GEMINI, "and becomes the last used")
        checkEq(t.target("another tab"), Pair(AgentCli.GEMINI, "g1"), "a foreign tab changes nothing")
        check(!t.ended(AgentCli.GEMINI, "g0")) { "an older gemini terminal ending forgets nothing" }
        check(t.ended(AgentCli.GEMINI, "g1")) { "ended" }
        checkEq(t.target(), Pair(AgentCli.QWEN, "q1"), "back to qwen")
        t.used(AgentCli.GEMINI)
        checkEq(t.lastUsed, AgentCli.QWEN, "a stopped agent cannot be used")
        checkEq(t.agentOf("q1"), AgentCli.QWEN, "agentOf")
        t.ended(AgentCli.QWEN, "q1")
        checkEq(t.target(), null, "none left")
    }

    h.test("Served lines and the status tooltip name the CLIs served and their discovery files") {
        checkEq(Served.names(CompanionCli.BOTH), "Qwen Code and Gemini CLI", "both")
        checkEq(Served.lines(CompanionCli.BOTH, DiscoveryFiles("/q/1.lock", "/t/g.json")),
            listOf("Serving Qwen Code and Gemini CLI", "  Qwen Code lock file: /q/1.lock", "  Gemini CLI discovery file: /t/g.json"), "lines")
        checkEq(Served.lines(CompanionCli.GEMINI, null), listOf("Companion not running (set to serve Gemini CLI)"), "stopped")
        val tip = CompanionStatus(true, 5, 1, 0, null, CompanionCli.GEMINI, DiscoveryFiles(null, "/t/g.json")).tooltip
        check(tip.contains("Serving Gemini CLI") && tip.contains("Gemini CLI discovery file: /t/g.json") && !tip.contains("lock file")) { tip }
    }

    h.test("CompanionHost with cli both: served, both discovery files, every variable; the files go with close") {
        val host = CompanionHost(HostSettings(ideName = "Test IDE", roots = listOf(ws.path), lockDir = File(dir, "locks").path,
            libraryPath = libPath, cli = CompanionCli.BOTH, geminiDir = File(dir, "gemini").path), NoPresenter, { null }, GeminiLog)
        try {
            checkEq(host.discoveryFiles(), null, "before start")
            check(host.start()) { "start: ${host.lastError}" }
            checkEq(host.served, CompanionCli.BOTH, "served")
            val files = host.discoveryFiles() ?: throw CheckFailed("no discovery files")
            check(files.qwen != null && File(files.qwen).isFile && files.gemini != null && File(files.gemini).isFile) { "files $files" }
            checkEq(host.terminalEnv().keys, (QWEN_VARS + GEMINI_VARS).toSet(), "env keys")
            val status = host.status()
            checkEq(status.served, CompanionCli.BOTH, "status served")
            check(status.tooltip.contains(files.gemini!!)) { status.tooltip }
            val ids = (host.health(null, null, "/nonexistent/qwen", "/nonexistent/gemini")["checks"] as List<*>).map { (it as Map<*, *>)["id"] }
            check("gemini" in ids && "qwen" in ids) { "health checks $ids" }
            host.close()
            host.closed.get(10, java.util.concurrent.TimeUnit.SECONDS)
            check(!File(files.qwen).exists() && !File(files.gemini).exists()) { "files left after close" }
        } finally {
            host.close()
        }
    }

    h.test("plugin.xml: Run Gemini CLI next to Run Qwen Code in the same groups, with an icon that exists and no shortcut") {
        val resources = File("examples/intellij/src/main/resources")
        val root = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(File(resources, "META-INF/qwen-terminal.xml")).documentElement
        val nodes = root.getElementsByTagName("action")
        val actions = (0 until nodes.length).map { nodes.item(it) as org.w3c.dom.Element }.associateBy { it.getAttribute("id") }
        val gem = actions["Qwen.RunGeminiCli"] ?: throw CheckFailed("Qwen.RunGeminiCli is not registered")
        val run = actions.getValue("Qwen.RunQwenCode")
        fun groups(e: org.w3c.dom.Element): Set<String> {
            val g = e.getElementsByTagName("add-to-group")
            return (0 until g.length).map { (g.item(it) as org.w3c.dom.Element).getAttribute("group-id") }.toSet()
        }
        checkEq(groups(gem), groups(run), "groups")
        val g = gem.getElementsByTagName("add-to-group")
        for (i in 0 until g.length) {
            val e = g.item(i) as org.w3c.dom.Element
            checkEq(e.getAttribute("anchor") + " " + e.getAttribute("relative-to-action"), "after Qwen.RunQwenCode", "placed after Run Qwen Code in ${e.getAttribute("group-id")}")
        }
        checkEq(gem.getAttribute("text"), "Run Gemini CLI", "text")
        checkEq(gem.getElementsByTagName("keyboard-shortcut").length, 0, "shortcuts")
        check(File(resources, gem.getAttribute("icon").trimStart('/')).isFile) { "icon ${gem.getAttribute("icon")}" }
    }
}
