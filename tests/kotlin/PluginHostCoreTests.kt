package qwen.companion.tests

import qwen.companion.intellij.core.BridgeInstaller
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.PluginHostManager
import qwen.companion.intellij.core.PluginHostSettings
import qwen.companion.intellij.core.PluginNotifier
import qwen.companion.QcBundled
import java.io.File
import java.nio.file.Files
import java.nio.file.attribute.BasicFileAttributes
import java.nio.file.attribute.PosixFilePermissions
import java.util.Collections

private class ListLog : HostLog {
    val lines: MutableList<String> = Collections.synchronizedList(ArrayList<String>())
    override fun info(message: String) { lines.add("I $message") }
    override fun warn(message: String, error: Throwable?) { lines.add("W $message") }
    override fun error(message: String, error: Throwable?) { lines.add("E $message") }
}

private class RecordingNotifier(var answer: Boolean = true) : PluginNotifier {
    val shown: MutableList<Pair<String, Map<String, Any?>>> = Collections.synchronizedList(ArrayList<Pair<String, Map<String, Any?>>>())
    override fun show(plugin: String, params: Map<String, Any?>): Boolean {
        shown.add(Pair(plugin, params))
        return answer
    }
}

@Suppress("UNCHECKED_CAST")
private fun textOf(result: Map<String, Any?>): String? =
    ((result["content"] as? List<Any?>)?.firstOrNull() as? Map<String, Any?>)?.get("text") as? String

private fun inode(f: File): Any? = Files.readAttributes(f.toPath(), BasicFileAttributes::class.java).fileKey()

/** The IDE-wide plugin host of the IntelliJ plugin (core/PluginHostManager.kt), against the real library. */
fun intellijPluginHostTests(h: Harness, root: File, libPath: String?) {
    h.group("intellij core: plugin host")
    val lib = File(libPath ?: "target/release/libqwen_companion.so").absoluteFile
    val bridge = File(lib.parentFile, BridgeInstaller.NAME)
    val fixtures = File("tests/plugins/fixtures").absoluteFile
    var n = 0
    fun settings(project: File): PluginHostSettings {
        val i = n++
        return PluginHostSettings(
            pluginsDir = File(root, "plugins-$i").path,
            libraryPath = lib.path,
            bridgeSource = bridge.path,
            bridgeDir = File(root, "bin-$i").path,
            registerProject = project.path,
            workspacePaths = listOf(project.path),
            mcpLockDir = File(root, "mcp-locks-$i").path
        )
    }

    h.test("BridgeInstaller: executable copy, kept when equal, replaced atomically when it differs") {
        val src = File(root, "src-bridge").also { it.mkdirs() }
        val exe = File(src, BridgeInstaller.NAME)
        exe.writeText("#!/bin/sh\necho one\n")
        val dest = File(root, "dest-bin")
        val installed = BridgeInstaller.install(exe, dest)
        checkEq(installed.path, File(dest, BridgeInstaller.NAME).path, "path")
        check(installed.canExecute()) { "not executable" }
        checkEq(installed.readText(), exe.readText(), "content")
        val before = inode(installed)
        BridgeInstaller.install(exe, dest)
        checkEq(inode(installed), before, "unchanged content is not rewritten")
        exe.writeText("#!/bin/sh\necho two\n")
        BridgeInstaller.install(exe, dest)
        checkEq(installed.readText(), "#!/bin/sh\necho two\n", "new content")
        check(inode(installed) != before) { "replaced by rename, not written in place" }
        checkEq(dest.list()!!.toList(), listOf(BridgeInstaller.NAME), "no temporary file left")
        expectThrows<java.io.IOException>("missing source") { BridgeInstaller.install(File(src, "nope"), dest) }
    }

    h.test("BridgeInstaller on Windows: a running bridge (it cannot be replaced) is moved aside, then removed once free") {
        val src = File(root, "src-win").also { it.mkdirs() }
        val exe = File(src, "qc-mcp-bridge.exe").also { it.writeText("new") }
        val dest = File(root, "dest-win").also { it.mkdirs() }
        val running = File(dest, "qc-mcp-bridge.exe").also { it.writeText("old, running") }
        val refuse: (java.nio.file.Path, java.nio.file.Path) -> Unit = { a, b ->
            if (b == running.toPath() && running.exists() && a.fileName.toString().endsWith(".tmp")) {
                throw java.nio.file.AccessDeniedException(b.toString())
            }
            java.nio.file.Files.move(a, b, java.nio.file.StandardCopyOption.REPLACE_EXISTING)
        }
        expectThrows<java.nio.file.AccessDeniedException>("elsewhere the error stands") { BridgeInstaller.install(exe, dest, false, refuse) }
        checkEq(running.readText(), "old, running", "untouched")
        BridgeInstaller.install(exe, dest, true, refuse)
        checkEq(running.readText(), "new", "replaced")
        checkEq(dest.list()!!.toList(), listOf("qc-mcp-bridge.exe"), "the old copy is removed once free")
    }

    h.test("QcBundled.installFile: user-only folder and file; a source that does not give the digest leaves the old file and no temporary") {
        val dir = File(root, "verified")
        val dest = File(dir, "tool")
        val one = "#!/bin/sh\necho one\n".toByteArray()
        val oneSha = QcBundled.hex(QcBundled.sha256(one.inputStream()))
        QcBundled.installFile(dest, oneSha, { one.inputStream() })
        val perms = { p: File -> PosixFilePermissions.toString(Files.getPosixFilePermissions(p.toPath())) }
        checkEq(perms(dir), "rwx------", "folder mode")
        checkEq(perms(dest), "rwx------", "file mode")
        val e = expectThrows<java.io.IOException>("a source with other bytes") {
            QcBundled.installFile(dest, "0".repeat(64), { "other".byteInputStream() })
        }
        check(e.message!!.contains("expected " + "0".repeat(64))) { "message: ${e.message}" }
        checkEq(dest.readBytes().toList(), one.toList(), "the intact file stays")
        checkEq(dir.list()!!.toList(), listOf("tool"), "no temporary file left")
        expectThrows<IllegalArgumentException>("not a digest") { QcBundled.installFile(dest, "abc", { one.inputStream() }) }
        checkEq(QcBundled.hasLibrary(), false, "the test jar carries no natives")
        val missing = expectThrows<java.io.IOException>("no bridge in a development jar") { QcBundled.installBridge(File(root, "no-bin")) }
        check(missing.message!!.contains("carries no native files")) { "message: ${missing.message}" }
    }

    h.test("one host: MCP server started, bridge installed, entry registered once, notifications answered, close ends it") {
        val project = File(root, "proj-a").also { it.mkdirs() }
        val s = settings(project)
        val notifier = RecordingNotifier()
        val log = ListLog()
        val m = PluginHostManager(s, notifier, log)
        try {
            val host = m.host() ?: throw CheckFailed("no host: ${m.lastError} ${log.lines}")
            check(m.host() === host) { "a second call gives the same host" }
            checkEq(m.lastError, null, "lastError")
            val info = m.mcpInfo!!
            checkEq(info["serverName"], "qwen-companion-plugins", "serverName")
            val lockFile = File(info["lockFile"] as String)
            check(lockFile.isFile && lockFile.parentFile.path == s.mcpLockDir) { "lock file $lockFile" }
            check(lockFile.readText().contains(project.path)) { "workspacePaths in ${lockFile.readText()}" }
            checkEq(m.terminalEnv(), mapOf("QWEN_COMPANION_PLUGINS_PID" to ProcessHandle.current().pid().toString()),
                "terminal env (names this IDE for the bridge)")
            val installed = File(s.bridgeDir, BridgeInstaller.NAME)
            check(installed.canExecute()) { "bridge copy $installed" }
            val reg = m.registration!!
            checkEq(reg["change"], "added", "change")
            val settingsFile = File(project, ".qwen/settings.json")
            checkEq(reg["settings"], settingsFile.path, "settings path")
            val text = settingsFile.readText()
            check(text.contains("qwen-companion-plugins") && text.contains(installed.path)) { text }

            host.install(File(fixtures, "todo-quadrant").path)
            host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "add", "content" to "seam"))
            checkEq(textOf(host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))),
                "Reminder shown.", "answered shown")
            checkEq(notifier.shown.size, 1, "notifications")
            checkEq(notifier.shown[0].first, "local.todo-quadrant", "plugin")
            checkEq(notifier.shown[0].second["viewId"], "quadrant", "params")
            notifier.answer = false
            checkEq(textOf(host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))),
                "Reminder not shown (disabled).", "answered not shown")

            m.close()
            check(!lockFile.exists()) { "lock file removed on close" }
            check(host.isClosed) { "host closed" }
            checkEq(m.host(), null, "no host after close")
        } finally {
            m.close()
        }
    }

    h.test("a second manager (IDE restart) finds the entry unchanged; capabilities added later reach the host") {
        val project = File(root, "proj-b").also { it.mkdirs() }
        val s = settings(project)
        val first = PluginHostManager(s, RecordingNotifier(), ListLog())
        try {
            checkEq(first.host() != null, true, "first host")
            checkEq(first.registration!!["change"], "added", "first change")
        } finally {
            first.close()
        }
        val again = PluginHostManager(s, RecordingNotifier(), ListLog())
        try {
            val host = again.host()!!
            checkEq(again.registration!!["change"], "unchanged", "second change")
            val seen = Collections.synchronizedList(ArrayList<String>())
            again.setCapability("show_notification") { req -> seen.add(req["plugin"] as String); mapOf("shown" to true) }
            host.install(File(fixtures, "todo-quadrant").path)
            host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))
            checkEq(seen.toList(), listOf("local.todo-quadrant"), "replaced handler")
        } finally {
            again.close()
        }
    }

    h.test("a host that cannot start reports why once and is not retried until reset") {
        val project = File(root, "proj-c").also { it.mkdirs() }
        val s = settings(project).copy(libraryPath = "/no/such/libqwen_companion.so")
        val log = ListLog()
        val m = PluginHostManager(s, RecordingNotifier(), log)
        checkEq(m.host(), null, "no host")
        check(m.lastError!!.contains("/no/such/libqwen_companion.so")) { "lastError ${m.lastError}" }
        val warned = log.lines.size
        checkEq(m.host(), null, "still none")
        checkEq(log.lines.size, warned, "not retried (no new log line)")
        m.reset()
        checkEq(m.lastError, null, "reset clears")
        checkEq(m.host(), null, "retried and failed again")
        check(log.lines.size > warned) { "retried after reset" }
        m.close()
    }

    h.test("a settings file Qwen Code cannot read: the host runs, the file is untouched, lastError says why") {
        val project = File(root, "proj-d").also { File(it, ".qwen").mkdirs() }
        val bad = File(project, ".qwen/settings.json")
        bad.writeText("{ \"mcpServers\": [ }")
        val m = PluginHostManager(settings(project), RecordingNotifier(), ListLog())
        try {
            check(m.host() != null) { "host runs: ${m.lastError}" }
            check(m.lastError!!.contains("register")) { "lastError ${m.lastError}" }
            checkEq(bad.readText(), "{ \"mcpServers\": [ }", "untouched")
            checkEq(m.registration, null, "no registration")
        } finally {
            m.close()
        }
    }
}
