package qwen.companion.tests

import qwen.companion.LogLevel
import qwen.companion.Pending
import qwen.companion.PluginCallException
import qwen.companion.PluginInstallException
import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import java.io.File
import java.util.Collections
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference

private val FIXTURES = File("tests/plugins/fixtures").absoluteFile

private fun fixture(vararg parts: String): String = parts.fold(FIXTURES) { f, p -> File(f, p) }.path

/** Live child processes of this JVM (the host spawns plugins directly). */
private fun childPids(): List<Long> {
    val out = ArrayList<Long>()
    ProcessHandle.current().children().forEach { if (it.isAlive) out.add(it.pid()) }
    return out
}

@Suppress("UNCHECKED_CAST")
private fun firstText(result: Map<String, Any?>): String? =
    ((result["content"] as? List<Any?>)?.firstOrNull() as? Map<String, Any?>)?.get("text") as? String

fun pluginTests(h: Harness, root: File) {
    h.group("plugin host")
    var n = 0
    // A fresh plugins directory per host; every host closed after its test.
    fun host(config: (String) -> QwenPluginHostConfig = { QwenPluginHostConfig(pluginsDir = it) }): QwenPluginHost =
        QwenPluginHost(config(File(root, "plugins-${n++}").path))

    fun withHost(body: (QwenPluginHost) -> Unit) {
        val host = host()
        try {
            body(host)
        } finally {
            host.close()
        }
    }

    h.test("install, list, call, replace") {
        withHost { host ->
            val summary = host.install(fixture("hello"))
            checkEq(summary["id"], "com.example.hello", "id")
            checkEq(summary["replaced"], false, "replaced")
            checkEq(host.list().map { it["id"] }, listOf("com.example.hello"), "list")
            checkEq(firstText(host.call("com.example.hello", "say_hello", mapOf("name" to "Ada"))), "Hello, Ada!", "text")
            checkEq(host.install(fixture("hello"))["replaced"], true, "replaced again")
            check(host.pluginsDir.endsWith("plugins-${n - 1}")) { "pluginsDir ${host.pluginsDir}" }
        }
    }

    h.test("invalid manifest: PluginInstallException with code and problems, nothing installed") {
        withHost { host ->
            val e = expectThrows<PluginInstallException>("install") { host.install(fixture("invalid", "tool-name-invalid")) }
            checkEq(e.errorCode, "invalid_manifest", "code")
            check(e.problems.isNotEmpty()) { "problems: ${e.details}" }
            checkEq(e.status, QcStatus.REFUSED, "status")
            checkEq(host.list(), emptyList<Any?>(), "list")
        }
    }

    h.test("schema error before the plugin runs; unknown tool; unknown plugin") {
        withHost { host ->
            host.install(fixture("hello"))
            val e = expectThrows<PluginCallException>("schema") { host.call("com.example.hello", "say_hello", mapOf("name" to 42)) }
            checkEq(e.kind, "schema", "kind")
            checkEq(e.status, QcStatus.INVALID_ARGUMENT, "status")
            checkEq(e.schemaErrors.firstOrNull()?.get("path"), "/name", "path")
            checkEq(host.stats("com.example.hello")["starts"], 0L, "starts")
            checkEq(expectThrows<PluginCallException>("unknown tool") { host.call("com.example.hello", "nope") }.kind, "unknown_tool", "kind")
            val nf = expectThrows<PluginCallException>("unknown plugin") { host.call("com.example.absent", "x") }
            checkEq(nf.kind, "not_found", "kind")
            checkEq(nf.status, QcStatus.NOT_FOUND, "status")
        }
    }

    h.test("tool_error carries the plugin's message; exited carries code and stderr") {
        withHost { host ->
            host.install(fixture("todo-quadrant"))
            host.install(fixture("hostile", "crash-mid-call"))
            val te = expectThrows<PluginCallException>("tool_error") {
                host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "add", "content" to " "))
            }
            checkEq(te.kind, "tool_error", "kind")
            check(te.pluginMessage?.contains("add needs a non-empty \"content\"") == true) { "pluginMessage ${te.pluginMessage}" }
            val ex = expectThrows<PluginCallException>("exited") { host.call("test.hostile.crash-mid-call", "explode") }
            checkEq(ex.kind, "exited", "kind")
            checkEq(ex.exitCode, 3L, "exit code")
            check(ex.stderrTail?.contains("boom mid-call") == true) { "stderrTail ${ex.stderrTail}" }
        }
    }

    h.test("ui_push events in order on qc-cb, plugin_started with a pid") {
        withHost { host ->
            val events = Collections.synchronizedList(ArrayList<Map<String, Any?>>())
            val threads = Collections.synchronizedSet(HashSet<String>())
            host.onEvent { e -> events.add(e); threads.add(Thread.currentThread().name) }
            host.install(fixture("hostile", "ui-push"))
            checkEq(firstText(host.call("test.hostile.ui-push", "progress", mapOf("steps" to 3))), "pushed 3 updates", "text")
            fun pushes() = synchronized(events) { events.filter { it["type"] == "ui_push" } }
            eventually(10000, "3 pushes") { pushes().size == 3 }
            checkEq(pushes().map { it["payload"] }, (1..3).map { mapOf("step" to it.toLong(), "of" to 3L) }, "payloads")
            val started = synchronized(events) { events.first { it["type"] == "plugin_started" } }
            check((started["pid"] as Long) > 0) { "pid $started" }
            checkEq(threads.toSet(), setOf("qc-cb"), "threads")
        }
    }

    h.test("show_notification answered by a Kotlin handler; a throwing handler gives host_error") {
        withHost { host ->
            host.install(fixture("todo-quadrant"))
            val seen = AtomicReference<Map<String, Any?>>()
            host.setCapability("show_notification") { req -> seen.set(req); mapOf("shown" to true) }
            host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "add", "content" to "write tests"))
            val out = host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))
            checkEq(firstText(out), "Reminder shown.", "text")
            checkEq(seen.get()["capability"], "show_notification", "capability")
            @Suppress("UNCHECKED_CAST")
            checkEq((seen.get()["params"] as Map<String, Any?>)["viewId"], "quadrant", "viewId")

            val logged = Collections.synchronizedList(ArrayList<String>())
            host.setLogHandler({ _, m -> logged.add(m) }, LogLevel.WARN)
            host.setCapability("show_notification") { throw IllegalStateException("do not disturb") }
            val e = expectThrows<PluginCallException>("refused") {
                host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))
            }
            check(e.pluginMessage?.contains("do not disturb") == true) { "pluginMessage ${e.pluginMessage}" }
            eventually(5000, "the failure logged") { synchronized(logged) { logged.any { it.contains("do not disturb") } } }
        }
    }

    h.test("capability answered later with Pending; respond() for a settled id is NOT_FOUND") {
        withHost { host ->
            host.install(fixture("todo-quadrant"))
            val answers = Collections.synchronizedList(ArrayList<Boolean>())
            val ids = Collections.synchronizedList(ArrayList<Long>())
            val answered = CountDownLatch(1)
            host.setCapability("show_notification") { req ->
                ids.add(req["id"] as Long)
                val p = Pending()
                Thread {
                    Thread.sleep(100) // a deliberately late answer
                    answers.add(p.resolve(mapOf("shown" to false, "reason" to "later")))
                    answers.add(p.resolve(mapOf("shown" to true)))
                    answered.countDown()
                }.start()
                p
            }
            val out = host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))
            checkEq(firstText(out), "Reminder not shown (later).", "text")
            check(answered.await(10, TimeUnit.SECONDS)) { "answer thread" }
            checkEq(answers.toList(), listOf(true, false), "answers")
            expectStatus(QcStatus.NOT_FOUND, "respond again") { host.respond(ids[0], mapOf("shown" to true)) }
        }
    }

    h.test("default render_pdf writes a PDF") {
        withHost { host ->
            host.install(fixture("full"))
            val target = File(root, "pdf/report.pdf")
            val out = host.call("com.example.full", "export_pdf", mapOf("title" to "T", "content" to "# Hello\n\nSome *text*.", "outputPath" to target.path))
            @Suppress("UNCHECKED_CAST")
            checkEq((out["details"] as Map<String, Any?>)["filePath"], target.path, "filePath")
            checkEq(String(target.readBytes().copyOf(5), Charsets.US_ASCII), "%PDF-", "magic")
        }
    }

    h.test("visible, options (Auto first), parseDocument") {
        withHost { host ->
            host.install(fixture("full"))
            val repo = File(root, "repo").also { File(it, ".git").mkdirs() }
            val plain = File(root, "plain").also { it.mkdirs() }
            checkEq(host.visible("com.example.full", repo.path), true, "repo")
            checkEq(host.visible("com.example.full", plain.path), false, "plain")
            val options = host.options("com.example.full", "mode")
            checkEq(options.first(), mapOf("value" to "auto", "label" to "Auto"), "Auto")
            checkEq(options.drop(1).map { it["value"] }, listOf("fast", "accurate"), "options")
            checkEq(host.parseDocument("text/markdown", "# Héllo\n".toByteArray(Charsets.UTF_8)), mapOf("success" to true, "text" to "# Héllo\n"), "parse")
            checkEq(host.parseDocument("text/markdown", byteArrayOf(0xff.toByte(), 0)) ["success"], false, "bad utf-8")
            checkEq(host.parseDocument("text/markdown", ByteArray(0))["success"], true, "empty file")
            checkEq(expectThrows<PluginCallException>("no parser") { host.parseDocument("application/x-none", ByteArray(1)) }.kind, "not_found", "kind")
        }
    }

    h.test("config values reach context; unload, disable, enable") {
        withHost { host ->
            host.install(fixture("full"))
            host.setConfigValue("com.example.full", "prefix", ">> ")
            @Suppress("UNCHECKED_CAST")
            val todos = (host.call("com.example.full", "do_something")["details"] as Map<String, Any?>)["todos"] as List<Map<String, Any?>>
            check((todos[0]["content"] as String).startsWith(">> ")) { "todos $todos" }
            expectStatus(QcStatus.INVALID_ARGUMENT, "wrong type") { host.setConfigValue("com.example.full", "limit", "x") }
            checkEq(host.stats("com.example.full")["running"], true, "running")
            host.unload("com.example.full")
            checkEq(host.stats("com.example.full")["running"], false, "unloaded")
            host.disable("com.example.full")
            checkEq(expectThrows<PluginCallException>("disabled") { host.call("com.example.full", "do_something") }.kind, "disabled", "kind")
            host.enable("com.example.full")
            host.call("com.example.full", "do_something")
            checkEq(host.stats("com.example.full")["starts"], 2L, "starts")
            checkEq(host.uninstall("com.example.full"), mapOf("id" to "com.example.full", "dataRemoved" to false), "uninstall")
            checkEq(expectThrows<PluginInstallException>("again") { host.uninstall("com.example.full") }.errorCode, "not_found", "code")
        }
    }

    h.test("callAsync: result and error on qc-cb; a throwing callback is contained") {
        withHost { host ->
            host.install(fixture("hello"))
            val results = Collections.synchronizedList(ArrayList<Triple<Map<String, Any?>?, PluginCallException?, String>>())
            val done = CountDownLatch(3)
            val cb = { r: Map<String, Any?>?, e: PluginCallException? ->
                results.add(Triple(r, e, Thread.currentThread().name)); done.countDown()
            }
            host.callAsync("com.example.hello", "say_hello", mapOf("name" to "Ada"), callback = cb)
            host.callAsync("com.example.hello", "nope", callback = cb)
            host.callAsync("com.example.hello", "say_hello", mapOf("name" to "x")) { _, _ -> done.countDown(); throw RuntimeException("boom in callback") }
            check(done.await(10, TimeUnit.SECONDS)) { "callbacks" }
            val ok = results.first { it.first != null }
            checkEq(firstText(ok.first!!), "Hello, Ada!", "text")
            val bad = results.first { it.second != null }
            checkEq(bad.second!!.kind, "unknown_tool", "kind")
            checkEq(bad.second!!.status, QcStatus.NOT_FOUND, "status")
            checkEq(results.map { it.third }.toSet(), setOf("qc-cb"), "threads")
            checkEq(firstText(host.call("com.example.hello", "say_hello", mapOf("name" to "b"))), "Hello, b!", "still works")
        }
    }

    h.test("pull mode: a capability request as an event, answered with respond()") {
        withHost { host ->
            host.install(fixture("todo-quadrant"))
            val fd = host.enableEvents()
            check(fd > 2) { "fd $fd" }
            host.offerCapability("show_notification")
            val out = AtomicReference<Any?>()
            val t = Thread {
                out.set(try {
                    host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to "remind_now"))
                } catch (e: Throwable) {
                    e
                })
            }
            t.start()
            var request: Map<String, Any?>? = null
            eventually(10000, "a host_request event") {
                var ev = host.nextEvent()
                while (ev != null && request == null) {
                    if (ev["type"] == "host_request") request = ev
                    ev = host.nextEvent()
                }
                request != null
            }
            checkEq(request!!["capability"], "show_notification", "capability")
            host.respond(request!!["id"] as Long, mapOf("shown" to true))
            t.join(10000)
            @Suppress("UNCHECKED_CAST")
            checkEq(firstText(out.get() as Map<String, Any?>), "Reminder shown.", "text")
        }
    }

    h.test("bad arguments and config are refused; close is idempotent and ends every plugin") {
        expectStatus(QcStatus.INVALID_ARGUMENT, "callTimeoutMs") { host { QwenPluginHostConfig(pluginsDir = it, callTimeoutMs = 1) }.close() }
        expectStatus(QcStatus.INVALID_ARGUMENT, "replyPollUs") { host { QwenPluginHostConfig(pluginsDir = it, replyPollUs = 10001) }.close() }
        expectStatus(QcStatus.INVALID_ARGUMENT, "restartBackoffMs") { host { QwenPluginHostConfig(pluginsDir = it, restartBackoffMs = 600001) }.close() }
        host { QwenPluginHostConfig(pluginsDir = it, replyPollUs = 0, restartBackoffMs = 0) }.close()
        expectStatus(QcStatus.INVALID_JSON, "unknown field") { QwenPluginHost.fromJson("{\"noSuchField\":1}").close() }
        val host = host()
        host.install(fixture("todo-quadrant"))
        expectStatus(QcStatus.INVALID_ARGUMENT, "NUL") { host.call("a\u0000b", "t") }
        expectStatus(QcStatus.INVALID_ARGUMENT, "not JSON") { host.call("local.todo-quadrant", "manage_todo_quadrant", mapOf("action" to Any())) }
        checkEq(host.startupFinished(), listOf(mapOf("plugin" to "local.todo-quadrant", "ok" to true)), "startup")
        check(childPids().isNotEmpty()) { "a plugin runs" }
        host.close()
        host.close()
        expectThrows<QwenCompanionException.Closed>("after close") { host.list() }
        eventually(10000, "no plugin left (${childPids()})") { childPids().isEmpty() }
    }

    h.test("plugin MCP server: start, info, raw MCP request with the header, stop, close") {
        val host = QwenPluginHost(QwenPluginHostConfig(pluginsDir = File(root, "plugins-${n++}").path, workspaceRoot = root.path))
        try {
            host.install(fixture("hello"))
            expectStatus(QcStatus.NOT_RUNNING, "info before start") { host.mcpInfo() }
            expectStatus(QcStatus.NOT_RUNNING, "stop before start") { host.mcpStop() }
            val lockDir = File(root, "mcp-locks").path
            val info = host.mcpStart(mapOf("lockDir" to lockDir))
            val port = (info["port"] as Number).toInt()
            checkEq(info["url"], "http://127.0.0.1:$port/mcp", "url")
            checkEq(info["serverName"], "qwen-companion-plugins", "serverName")
            checkEq(info["env"], mapOf("QWEN_COMPANION_PLUGINS_PID" to ProcessHandle.current().pid().toString()), "env")
            @Suppress("UNCHECKED_CAST")
            val tools = info["tools"] as List<Any?>
            check(tools.contains("hello_say_hello") && tools.contains("plugins-status")) { "tools $tools" }
            val lockFile = File(info["lockFile"] as String)
            check(lockFile.isFile) { "lock file $lockFile" }
            expectStatus(QcStatus.ALREADY_RUNNING, "second start") { host.mcpStart(mapOf("lockDir" to lockDir)) }
            @Suppress("UNCHECKED_CAST")
            val auth = (info["headers"] as Map<String, Any?>)["Authorization"] as String
            fun post(authorization: String): Pair<Int, String> {
                val c = java.net.URL(info["url"] as String).openConnection() as java.net.HttpURLConnection
                c.requestMethod = "POST"
                c.doOutput = true
                c.setRequestProperty("Authorization", authorization)
                c.setRequestProperty("Accept", "application/json, text/event-stream")
                c.setRequestProperty("Content-Type", "application/json")
                c.outputStream.use {
                    it.write(("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"," +
                        "\"capabilities\":{},\"clientInfo\":{\"name\":\"kotlin\",\"version\":\"1\"}}}").toByteArray())
                }
                val code = c.responseCode
                val body = (if (code < 400) c.inputStream else c.errorStream)?.use { String(it.readBytes()) } ?: ""
                c.disconnect()
                return Pair(code, body)
            }
            val ok = post(auth)
            checkEq(ok.first, 200, "initialize with the header")
            check(ok.second.contains("qwen-companion-plugins")) { "serverInfo in ${ok.second}" }
            checkEq(post("Bearer 0000").first, 401, "a wrong token")
            host.mcpStop()
            check(!lockFile.exists()) { "stop removes the lock file" }
            expectStatus(QcStatus.NOT_RUNNING, "info after stop") { host.mcpInfo() }
            val again = host.mcpStart(mapOf("lockDir" to lockDir))
            val lock2 = File(again["lockFile"] as String)
            check(lock2.isFile) { "restarted" }
            host.close()
            check(!lock2.exists()) { "close removes the lock file" }
        } finally {
            host.close()
        }
    }

    h.test("view server: viewsStart, views, viewUrl, setColorScheme, views_changed, notification view, list manifest") {
        withHost { host ->
            host.install(fixture("view-probe"))
            host.install(fixture("hello"))
            val probe = "test.view-probe"
            expectStatus(QcStatus.NOT_RUNNING, "views before start") { host.views() }
            host.setColorScheme("dark")
            val events = Collections.synchronizedList(ArrayList<Map<String, Any?>>())
            host.onEvent { events.add(it) }
            val seen = AtomicReference<Map<String, Any?>>()
            host.setCapability("show_notification") { req -> seen.set(req); mapOf("shown" to true) }
            val info = host.viewsStart()
            checkEq(info["colorScheme"], "dark", "scheme set before start")
            @Suppress("UNCHECKED_CAST")
            val views = info["views"] as List<Map<String, Any?>>
            checkEq(views.map { Pair(it["plugin"], it["id"]) }, listOf(Pair(probe, "probe")), "views")
            val url = host.viewUrl(probe, "probe")
            checkEq(views[0]["url"], url, "viewUrl")
            check(host.viewUrl(probe).endsWith("/panel/panel.html")) { "panel url" }
            expectStatus(QcStatus.NOT_FOUND, "no view") { host.viewUrl(probe, "nope") }
            expectStatus(QcStatus.NOT_FOUND, "no panel") { host.viewUrl("com.example.hello") }
            expectStatus(QcStatus.INVALID_ARGUMENT, "bad scheme") { host.setColorScheme("blue") }
            expectStatus(QcStatus.ALREADY_RUNNING, "second start") { host.viewsStart() }
            val c = java.net.URL(url).openConnection() as java.net.HttpURLConnection
            checkEq(c.responseCode, 200, "page")
            val page = c.inputStream.use { String(it.readBytes()) }
            check(page.indexOf("'pluginHost'") in 0 until page.indexOf("<meta charset")) { "injected first" }
            check(c.getHeaderField("Content-Security-Policy")?.startsWith("default-src 'none'") == true) { "csp" }
            c.disconnect()
            host.setColorScheme("light")
            checkEq(host.views()["colorScheme"], "light", "scheme")
            host.disable(probe)
            eventually(5000, "views_changed") { synchronized(events) { events.any { it["type"] == "views_changed" } } }
            expectStatus(QcStatus.NOT_FOUND, "disabled") { host.viewUrl(probe, "probe") }
            host.enable(probe)
            host.call(probe, "notify", mapOf("viewId" to "probe"))
            @Suppress("UNCHECKED_CAST")
            val params = seen.get()["params"] as Map<String, Any?>
            checkEq(params["view"], mapOf("id" to "probe", "title" to "View Probe", "url" to url), "view link")
            val listed = host.list().first { it["id"] == probe }
            @Suppress("UNCHECKED_CAST")
            checkEq((listed["manifest"] as Map<String, Any?>)["id"], probe, "manifest")
            check(listed.containsKey("lastError") && listed["lastError"] == null) { "lastError ${listed["lastError"]}" }
            host.viewsStop()
            expectStatus(QcStatus.NOT_RUNNING, "stop twice") { host.viewsStop() }
        }
    }

    h.test("registerMcp / unregisterMcp in a project keep comments; a bad settings file is refused untouched") {
        val project = File(root, "mcp-project")
        val qwen = File(project, ".qwen")
        qwen.mkdirs()
        val settings = File(qwen, "settings.json")
        settings.writeText("{\n  // mine\n  \"theme\": \"dark\"\n}\n")
        val bridge = File(root, "qc-mcp-bridge")
        bridge.writeText("#!/bin/sh\nexit 1\n")
        bridge.setExecutable(true)
        val out = QwenPluginHost.registerMcp("project", project.path, bridge.path)
        checkEq(out["change"], "added", "change")
        checkEq(out["approve"], "qwen mcp approve qwen-companion-plugins", "approve")
        checkEq(out["settings"], settings.path, "settings")
        val text = settings.readText()
        check(text.contains("// mine") && text.contains(bridge.path)) { text }
        checkEq(QwenPluginHost.registerMcp("project", project.path, bridge.path)["change"], "unchanged", "again")
        checkEq(QwenPluginHost.registerMcp("project", project.path, bridge.path, alwaysLoadTools = true)["change"], "replaced", "alwaysLoadTools")
        checkEq(QwenPluginHost.unregisterMcp("project", project.path)["change"], "removed", "removed")
        check(settings.readText().contains("// mine") && !settings.readText().contains("qwen-companion-plugins")) { settings.readText() }
        checkEq(QwenPluginHost.unregisterMcp("project", project.path)["change"], "absent", "absent")
        val bad = "{\n  \"a\": 1,\n}\n"
        settings.writeText(bad)
        val e = expectStatus(QcStatus.INVALID_JSON, "trailing comma") { QwenPluginHost.registerMcp("project", project.path, bridge.path) }
        check(e.detail.contains("line 3")) { e.detail }
        checkEq(settings.readText(), bad, "untouched")
        expectStatus(QcStatus.INVALID_ARGUMENT, "bad scope") { QwenPluginHost.registerMcp("global", bridge = bridge.path) }
        expectStatus(QcStatus.INVALID_ARGUMENT, "no bridge") { QwenPluginHost.registerMcp("project", project.path) }
        expectStatus(QcStatus.NOT_FOUND, "missing bridge") { QwenPluginHost.registerMcp("project", project.path, File(root, "nope").path) }
    }

    h.test("no plugin process left after the plugin tests") {
        eventually(10000, "no plugin left (${childPids()})") { childPids().isEmpty() }
    }
}
