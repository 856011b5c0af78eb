package qwen.companion.tests

import qwen.companion.HandleGuard
import qwen.companion.Json
import qwen.companion.LogLevel
import qwen.companion.OpenDiffResult
import qwen.companion.QcStatus
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
import java.io.File
import java.net.URI
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import java.util.Collections
import java.util.concurrent.CountDownLatch
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference

/** Temp dirs shared by the suites. */
class TestDirs(val root: File) {
    val ws: File = File(root, "ws").also { it.mkdirs() }
    val ws2: File = File(root, "ws2").also { it.mkdirs() }
    val lockDir: File = File(root, "locks") // created by the library (0700)
}

private fun perms(f: File): String = PosixFilePermissions.toString(Files.getPosixFilePermissions(f.toPath()))

class OpenCall(val path: String, val content: String, val thread: String)

fun bindingTests(h: Harness, dirs: TestDirs, libPath: String?) {
    h.group("binding: library")
    val lib = QwenCompanionLibrary.load()

    h.test("library loads via jna.library.path, ABI 1, version") {
        checkEq(lib.abiVersion, 1, "abi")
        check(lib.version.matches(Regex("\\d+\\.\\d+\\.\\d+.*"))) { "version ${lib.version}" }
    }

    h.test("explicit path loads; a missing file is a Load error naming it") {
        if (libPath != null) {
            val l2 = QwenCompanionLibrary.load(libPath)
            checkEq(l2.abiVersion, 1, "abi via explicit path")
        }
        val e = expectThrows<QwenCompanionException.Load>("missing lib") {
            QwenCompanionLibrary.load("/nonexistent/dir/libqwen_companion.so")
        }
        check(e.message!!.contains("/nonexistent/dir/libqwen_companion.so")) { "message: ${e.message}" }
        checkEq(e.status, null, "Load has no status")
    }

    h.test("QWEN_COMPANION_LIB is honoured; without any lookup the error says how to fix it") {
        if (libPath != null) {
            val ok = runLoadCheck(mapOf("QWEN_COMPANION_LIB" to libPath))
            checkEq(ok, "OK 1 $libPath", "child JVM with QWEN_COMPANION_LIB")
        }
        val missing = runLoadCheck(mapOf("QWEN_COMPANION_LIB" to null, "LD_LIBRARY_PATH" to null))
        check(missing.startsWith("LOAD ") && missing.contains("QWEN_COMPANION_LIB") && missing.contains("jna.library.path")) { "child output: $missing" }
        val wrong = runLoadCheck(mapOf("QWEN_COMPANION_LIB" to "/no/such/lib.so"))
        check(wrong.startsWith("LOAD ") && wrong.contains("/no/such/lib.so") && wrong.contains("QWEN_COMPANION_LIB")) { "child output: $wrong" }
    }

    h.test("a library reporting ABI 2 is refused at load (fake lib built with cc)") {
        val dir = File(dirs.root, "fakeabi").also { it.mkdirs() }
        val c = File(dir, "fake.c").also { it.writeText("unsigned int qc_abi_version(void) { return 2; }\nconst char *qc_version(void) { return \"9.9.9\"; }\n") }
        val so = File(dir, "libfake_qc.so")
        val cc = try {
            ProcessBuilder("cc", "-shared", "-fPIC", "-o", so.path, c.path).redirectErrorStream(true).start()
        } catch (e: java.io.IOException) {
            println("     (skipped: no C compiler: ${e.message})")
            return@test
        }
        val ccOut = String(cc.inputStream.readBytes())
        if (cc.waitFor() != 0) throw CheckFailed("cc failed: $ccOut")
        val e = expectThrows<QwenCompanionException.Load>("fake ABI 2") { QwenCompanionLibrary.load(so.path) }
        check(e.message!!.contains("ABI mismatch") && e.message!!.contains("ABI version 2") && e.message!!.contains(so.path)) { "message: ${e.message}" }
    }

    h.test("ABI check refuses another version with a clear message") {
        QwenCompanionLibrary.checkAbi(1, "x")
        val e = expectThrows<QwenCompanionException.Load>("abi 2") { QwenCompanionLibrary.checkAbi(2, "/some/lib.so") }
        check(e.message!!.contains("ABI mismatch") && e.message!!.contains("2") && e.message!!.contains("/some/lib.so")) { "message: ${e.message}" }
    }

    h.test("status table matches qc_status_name") {
        for (code in 0..12) {
            checkEq(QcStatus.fromCode(code).cName, lib.statusName(code), "code $code")
        }
        checkEq(lib.statusName(999), "QC_UNKNOWN", "999")
        checkEq(QcStatus.fromCode(999), QcStatus.UNKNOWN, "enum 999")
    }

    h.test("HandleGuard: close() never frees under a running call; the last call frees; idempotent") {
        val freed = AtomicInteger()
        val guard = HandleGuard("Thing", com.sun.jna.Pointer(0x1000)) { freed.incrementAndGet() }
        val inCall = CountDownLatch(1)
        val release = CountDownLatch(1)
        val t = Thread {
            guard.use { _ ->
                inCall.countDown()
                release.await()
            }
        }
        t.start()
        check(inCall.await(5, TimeUnit.SECONDS)) { "call did not start" }
        check(guard.destroy()) { "first destroy" }
        check(!guard.destroy()) { "second destroy" }
        checkEq(freed.get(), 0, "freed while a call runs")
        expectThrows<QwenCompanionException.Closed>("use after close") { guard.use { } }
        release.countDown()
        t.join(5000)
        checkEq(freed.get(), 1, "freed by the last call")
        expectThrows<QwenCompanionException.Closed>("use after free") { guard.use { } }
        val g2 = HandleGuard("Other", com.sun.jna.Pointer(0x2000)) { freed.incrementAndGet() }
        g2.use { }
        checkEq(freed.get(), 1, "no free while open")
        g2.run() // the Cleaner's path
        checkEq(freed.get(), 2, "freed at once when idle")
    }

    h.group("binding: config and errors")

    h.test("relative workspace root -> INVALID_ARGUMENT") {
        expectStatus(QcStatus.INVALID_ARGUMENT, "relative root") {
            QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf("relative/dir"), lockDir = dirs.lockDir.path), lib).close()
        }
    }

    h.test("bad config JSON -> INVALID_JSON (syntax and unknown field)") {
        expectStatus(QcStatus.INVALID_JSON, "syntax") { QwenCompanion.fromJson("{bad", lib).close() }
        val e = expectStatus(QcStatus.INVALID_JSON, "unknown field") { QwenCompanion.fromJson("{\"noSuchField\":1}", lib).close() }
        checkEq(e.function, "qc_companion_new", "function")
        check(e.detail.contains("noSuchField")) { "detail: ${e.detail}" }
    }

    val logs = Collections.synchronizedList(ArrayList<String>())
    val logThreads = Collections.synchronizedSet(HashSet<String>())
    val cfg = QwenCompanionConfig(
        workspaceRoots = listOf(dirs.ws.path),
        ideName = "Kotlin Test IDE",
        ideDisplayName = "Kotlin Test Display",
        ideId = "kotlin-test",
        lockDir = dirs.lockDir.path,
        debounceMs = 20,
        maxWaitMs = 100
    )
    val c = QwenCompanion(cfg, lib)
    c.setLogHandler({ level, msg ->
        logs.add("$level $msg")
        logThreads.add(Thread.currentThread().name)
    }, LogLevel.DEBUG)

    h.group("binding: lifecycle")

    h.test("before start: NOT_RUNNING for port/env/lock path/stop; context works") {
        expectStatus(QcStatus.NOT_RUNNING, "port") { c.port() }
        checkEq(c.portOrNull(), null, "portOrNull")
        check(!c.isRunning) { "isRunning" }
        expectStatus(QcStatus.NOT_RUNNING, "env") { c.terminalEnv() }
        expectStatus(QcStatus.NOT_RUNNING, "lock path") { c.lockFilePath() }
        expectStatus(QcStatus.NOT_RUNNING, "stop") { c.stop() }
        val ctx = Json.parseObject(c.contextJson())
        checkEq(ctx.obj("workspaceState")["isTrusted"], true, "isTrusted")
    }

    h.test("start; second start -> ALREADY_RUNNING") {
        c.start()
        val port = c.port()
        check(port in 1..65535) { "port $port" }
        check(c.isRunning) { "isRunning" }
        expectStatus(QcStatus.ALREADY_RUNNING, "second start") { c.start() }
    }
    val port = c.port()
    var token = ""

    h.test("lock file: <lockDir>/<port>.lock, 0600 in a 0700 dir, fields") {
        val path = c.lockFilePath()
        checkEq(path, File(dirs.lockDir, "$port.lock").path, "path")
        val f = File(path)
        check(f.isFile) { "missing $path" }
        checkEq(perms(f), "rw-------", "file mode")
        checkEq(perms(dirs.lockDir), "rwx------", "dir mode")
        val lock = Json.parseObject(String(f.readBytes(), Charsets.UTF_8))
        checkEq(lock["port"], port.toLong(), "port")
        checkEq(lock["workspacePath"], dirs.ws.path, "workspacePath")
        checkEq(lock["ppid"], ProcessHandle.current().pid(), "ppid (this JVM)")
        checkEq(lock["ideName"], "Kotlin Test IDE", "ideName")
        checkEq(lock.obj("ideInfo")["name"], "kotlin-test", "ideInfo.name")
        checkEq(lock.obj("ideInfo")["displayName"], "Kotlin Test Display", "ideInfo.displayName")
        token = lock.str("authToken") ?: ""
        check(token.matches(Regex("[0-9a-f]{32,}"))) { "authToken '$token'" }
    }

    h.test("terminal env; workspace roots change rewrites lock + env") {
        checkEq(c.terminalEnv(), mapOf("QWEN_CODE_IDE_SERVER_PORT" to port.toString(), "QWEN_CODE_IDE_WORKSPACE_PATH" to dirs.ws.path), "env")
        Json.parseObject(c.terminalEnvJson())
        c.setWorkspaceRoots(listOf(dirs.ws.path, dirs.ws2.path))
        val both = dirs.ws.path + File.pathSeparator + dirs.ws2.path
        checkEq(c.terminalEnv()["QWEN_CODE_IDE_WORKSPACE_PATH"], both, "env after roots change")
        val lock = Json.parseObject(String(File(c.lockFilePath()).readBytes(), Charsets.UTF_8))
        checkEq(lock["workspacePath"], both, "lock workspacePath after roots change")
        checkEq(lock["authToken"], token, "token unchanged")
        expectStatus(QcStatus.INVALID_ARGUMENT, "relative root") { c.setWorkspaceRoots(listOf("rel")) }
        c.setWorkspaceRoots(listOf(dirs.ws.path))
    }

    h.test("log handler gets lines on the qc-cb thread") {
        eventually(3000, "a 'listening on' log line") { synchronized(logs) { logs.any { it.contains("listening on 127.0.0.1:$port") } } }
        checkEq(HashSet(logThreads), hashSetOf("qc-cb"), "log threads")
    }

    h.group("binding: MCP over HTTP")

    h.test("no token / wrong token -> 401, Origin -> 403") {
        McpClient(port, null).use { checkEq(it.post(mapOf("jsonrpc" to "2.0", "id" to 1, "method" to "ping")).status, 401, "no token") }
        McpClient(port, "0".repeat(64)).use { checkEq(it.post(mapOf("jsonrpc" to "2.0", "id" to 1, "method" to "ping")).status, 401, "wrong token") }
        McpClient(port, token).use {
            checkEq(it.post(mapOf("jsonrpc" to "2.0", "id" to 1, "method" to "ping"), mapOf("Origin" to "http://evil.example")).status, 403, "origin")
        }
        val other = McpClient(port, token)
        val resp = other.http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:$port/other")).header("Authorization", "Bearer $token").GET().build(), HttpResponse.BodyHandlers.ofString())
        checkEq(resp.statusCode(), 404, "other path")
    }

    val client = McpClient(port, token)
    var stream: SseStream? = null

    h.test("initialize -> notifications/initialized is 202") {
        val result = client.initialize()
        check(client.sessionId != null) { "session id" }
        checkEq(result.obj("serverInfo")["name"], "qwen-companion", "serverInfo.name")
        check(result.obj("capabilities").containsKey("tools")) { "tools capability: ${Json.write(result)}" }
        checkEq(client.initialized(), 202, "initialized status")
    }

    h.test("GET SSE stream opens and brings the initial ide/contextUpdate") {
        val s = client.openStream()
        stream = s
        checkEq(s.status, 200, "GET status")
        check(s.contentType.startsWith("text/event-stream")) { "content type ${s.contentType}" }
        val params = s.awaitNotification("ide/contextUpdate")
        check(params.obj("workspaceState").containsKey("openFiles")) { "params ${Json.write(params)}" }
    }

    h.test("tools/list has openDiff and closeDiff") {
        val msg = client.request("tools/list")
        val names = msg.obj("result").list("tools").map { (it as Map<*, *>)["name"] }
        check(names.contains("openDiff") && names.contains("closeDiff")) { "tools $names" }
    }

    val opens = LinkedBlockingQueue<OpenCall>()
    val closes = LinkedBlockingQueue<String>()
    val openAnswer = AtomicReference<(String, String) -> OpenDiffResult>({ _, _ -> OpenDiffResult.Shown })
    val closeAnswer = AtomicReference<(String) -> String?>({ _ -> null })
    c.onOpenDiff { path, content ->
        opens.add(OpenCall(path, content, Thread.currentThread().name))
        openAnswer.get()(path, content)
    }
    c.onCloseDiff { path ->
        closes.add(path)
        closeAnswer.get()(path)
    }
    // The handlers are only reachable from the companion's fields: collect now
    // to prove they are pinned for the handle's life.
    for (i in 0 until 3) {
        System.gc()
        Thread.sleep(20) // gives the collector time: not a wait for an event
    }

    fun openDiff(path: String, content: String): JsonObject =
        client.callTool("openDiff", mapOf("filePath" to path, "newContent" to content))

    fun textOf(result: JsonObject): String = ((result.list("content")[0] as Map<*, *>)["text"] as String)

    val accepted = File(dirs.ws, "accept ✓.txt").path
    val proposed = "héllo ✓ 𝄞\nline2\n"

    h.test("openDiff -> Kotlin handler (qc-cb thread, exact UTF-8) -> content []") {
        val result = openDiff(accepted, proposed)
        checkEq(result["isError"] ?: false, false, "isError")
        checkEq(result.list("content"), emptyList<Any?>(), "content")
        val call = opens.poll(5, TimeUnit.SECONDS) ?: throw CheckFailed("handler not called")
        checkEq(call.path, accepted, "path")
        checkEq(call.content, proposed, "content")
        checkEq(call.thread, "qc-cb", "thread")
    }

    h.test("diffAccept(edited) -> ide/diffAccepted on the SSE stream") {
        c.diffAccept(accepted, "edited ✓\n")
        val p = stream!!.awaitNotification("ide/diffAccepted") { it["filePath"] == accepted }
        checkEq(p["content"], "edited ✓\n", "content")
        expectStatus(QcStatus.NOT_FOUND, "second accept") { c.diffAccept(accepted, "x") }
    }

    h.test("diffAccept(null) sends the proposed text; diffAccept(\"\") sends empty text") {
        val a = File(dirs.ws, "a.txt").path
        openDiff(a, "PROPOSED\n")
        opens.poll(5, TimeUnit.SECONDS)
        c.diffAccept(a)
        checkEq(stream!!.awaitNotification("ide/diffAccepted") { it["filePath"] == a }["content"], "PROPOSED\n", "content")
        openDiff(a, "PROPOSED\n")
        opens.poll(5, TimeUnit.SECONDS)
        c.diffAccept(a, "")
        checkEq(stream!!.awaitNotification("ide/diffAccepted") { it["filePath"] == a }["content"], "", "empty content")
    }

    h.test("diffReject -> ide/diffRejected; diffClosed -> ide/diffClosed") {
        val r = File(dirs.ws, "r.txt").path
        openDiff(r, "R\n")
        opens.poll(5, TimeUnit.SECONDS)
        c.diffReject(r)
        stream!!.awaitNotification("ide/diffRejected") { it["filePath"] == r }
        openDiff(r, "R2\n")
        opens.poll(5, TimeUnit.SECONDS)
        c.diffClosed(r)
        stream!!.awaitNotification("ide/diffClosed") { it["filePath"] == r }
    }

    h.test("decisions without an open diff -> NOT_FOUND") {
        val nope = File(dirs.ws, "nope.txt").path
        expectStatus(QcStatus.NOT_FOUND, "accept") { c.diffAccept(nope, "x") }
        expectStatus(QcStatus.NOT_FOUND, "reject") { c.diffReject(nope) }
        expectStatus(QcStatus.NOT_FOUND, "closed") { c.diffClosed(nope) }
    }

    h.test("closeDiff (suppressNotification) -> handler text as {\"content\": ...}") {
        val f = File(dirs.ws, "hold.txt").path
        closeAnswer.set { _ -> "FINAL ✓\n" }
        openDiff(f, "HOLD\n")
        opens.poll(5, TimeUnit.SECONDS)
        val result = client.callTool("closeDiff", mapOf("filePath" to f, "suppressNotification" to true))
        checkEq(result["isError"] ?: false, false, "isError")
        checkEq((result.list("content")[0] as Map<*, *>)["type"], "text", "block type")
        checkEq(Json.parse(textOf(result)), mapOf("content" to "FINAL ✓\n"), "reply JSON")
        checkEq(closes.poll(5, TimeUnit.SECONDS), f, "handler path")
        expectStatus(QcStatus.NOT_FOUND, "accept after closeDiff") { c.diffAccept(f) }
    }

    h.test("closeDiff without suppress -> ide/diffClosed with the content") {
        val f = File(dirs.ws, "hold2.txt").path
        closeAnswer.set { _ -> "BUFFER\n" }
        openDiff(f, "HOLD\n")
        opens.poll(5, TimeUnit.SECONDS)
        val result = client.callTool("closeDiff", mapOf("filePath" to f))
        checkEq(Json.parse(textOf(result)), mapOf("content" to "BUFFER\n"), "reply JSON")
        checkEq(stream!!.awaitNotification("ide/diffClosed") { it["filePath"] == f }["content"], "BUFFER\n", "notification content")
        closes.clear()
    }

    h.test("closeDiff handler returning null -> {\"content\":null}; unknown path -> null without a call") {
        val f = File(dirs.ws, "hold3.txt").path
        closeAnswer.set { _ -> null }
        openDiff(f, "HOLD\n")
        opens.poll(5, TimeUnit.SECONDS)
        val result = client.callTool("closeDiff", mapOf("filePath" to f, "suppressNotification" to true))
        checkEq(Json.parse(textOf(result)), mapOf("content" to null), "reply JSON")
        closes.clear()
        val r2 = client.callTool("closeDiff", mapOf("filePath" to File(dirs.ws, "never.txt").path, "suppressNotification" to true))
        checkEq(Json.parse(textOf(r2)), mapOf("content" to null), "unknown path reply")
        checkEq(closes.poll(300, TimeUnit.MILLISECONDS), null, "handler not called for unknown path")
    }

    h.test("closeDiff handler throwing -> isError with its message") {
        val f = File(dirs.ws, "hold4.txt").path
        closeAnswer.set { _ -> throw IllegalStateException("close exploded") }
        openDiff(f, "HOLD\n")
        opens.poll(5, TimeUnit.SECONDS)
        val result = client.callTool("closeDiff", mapOf("filePath" to f, "suppressNotification" to true))
        checkEq(result["isError"], true, "isError")
        check(textOf(result).contains("close exploded")) { "text ${textOf(result)}" }
        closes.clear()
        closeAnswer.set { _ -> null }
    }

    h.test("openDiff refused -> isError with the handler's message") {
        openAnswer.set { _, _ -> OpenDiffResult.Refused("not today") }
        val result = openDiff(File(dirs.ws, "refused.txt").path, "X")
        opens.poll(5, TimeUnit.SECONDS)
        checkEq(result["isError"], true, "isError")
        checkEq(textOf(result), "not today", "text")
        expectStatus(QcStatus.NOT_FOUND, "refused diff is not open") { c.diffAccept(File(dirs.ws, "refused.txt").path) }
    }

    h.test("openDiff handler throwing (Exception and Error) -> isError, process alive") {
        openAnswer.set { _, _ -> throw RuntimeException("boom") }
        val r1 = openDiff(File(dirs.ws, "boom.txt").path, "X")
        checkEq(r1["isError"], true, "isError (exception)")
        check(textOf(r1).contains("boom")) { "text ${textOf(r1)}" }
        openAnswer.set { _, _ -> throw AssertionError("an Error, not an Exception") }
        val r2 = openDiff(File(dirs.ws, "boom.txt").path, "X")
        checkEq(r2["isError"], true, "isError (error)")
        check(textOf(r2).contains("an Error")) { "text ${textOf(r2)}" }
        opens.clear()
        openAnswer.set { _, _ -> OpenDiffResult.Shown }
        val r3 = openDiff(File(dirs.ws, "after.txt").path, "ok")
        checkEq(r3["isError"] ?: false, false, "works afterwards")
        opens.clear()
        c.diffReject(File(dirs.ws, "after.txt").path)
    }

    h.test("handler removed -> openDiff isError 'no diff view'") {
        c.onOpenDiff(null)
        val r = openDiff(File(dirs.ws, "none.txt").path, "X")
        checkEq(r["isError"], true, "isError")
        check(textOf(r).contains("no diff view")) { "text ${textOf(r)}" }
        c.onOpenDiff { path, content ->
            opens.add(OpenCall(path, content, Thread.currentThread().name))
            openAnswer.get()(path, content)
        }
    }

    h.group("binding: editor context")

    val main = File(dirs.ws, "src/Main.kt").also { it.parentFile.mkdirs(); it.writeText("fun main() {\n    println(\"hi\")\n}\n") }
    val readme = File(dirs.ws, "README.md").also { it.writeText("# readme\n") }

    h.test("open + focus + cursor + selection -> ide/contextUpdate with them") {
        c.fileOpened(readme.path)
        c.fileFocused(main.path)
        c.setCursor(null, 2, 5)
        c.setSelection(null, "println(\"hi\") ✓")
        val p = stream!!.awaitNotification("ide/contextUpdate", 5000) { params ->
            val files = (params["workspaceState"] as? Map<*, *>)?.get("openFiles") as? List<*> ?: emptyList<Any>()
            val active = files.firstOrNull() as? Map<*, *>
            active != null && active["path"] == main.path && active["selectedText"] == "println(\"hi\") ✓"
        }
        val files = p.obj("workspaceState").list("openFiles")
        @Suppress("UNCHECKED_CAST")
        val active = files[0] as JsonObject
        checkEq(active["isActive"], true, "isActive")
        checkEq(active["cursor"], mapOf("line" to 2L, "character" to 5L), "cursor")
        check(files.any { (it as Map<*, *>)["path"] == readme.path && it["isActive"] != true }) { "readme missing: ${Json.write(files)}" }
        checkEq(Json.parseObject(c.contextJson()), p, "contextJson equals the notification")
    }

    h.test("cursor on another path moves the focus; rename follows; close removes") {
        c.setCursor(readme.path, 1, 3)
        stream!!.awaitNotification("ide/contextUpdate", 5000) { params ->
            val first = ((params["workspaceState"] as Map<*, *>)["openFiles"] as List<*>).firstOrNull() as? Map<*, *>
            first != null && first["path"] == readme.path && first["isActive"] == true
        }
        val renamed = File(dirs.ws, "src/Renamed.kt")
        check(main.renameTo(renamed)) { "rename on disk" }
        c.fileRenamed(main.path, renamed.path)
        c.fileFocused(renamed.path)
        stream!!.awaitNotification("ide/contextUpdate", 5000) { params ->
            val first = ((params["workspaceState"] as Map<*, *>)["openFiles"] as List<*>).firstOrNull() as? Map<*, *>
            first != null && first["path"] == renamed.path
        }
        c.fileClosed(readme.path)
        stream!!.awaitNotification("ide/contextUpdate", 5000) { params ->
            val files = (params["workspaceState"] as Map<*, *>)["openFiles"] as List<*>
            files.none { (it as Map<*, *>)["path"] == readme.path }
        }
    }

    h.test("trust -> isTrusted false; setContextJson replaces; bad JSON -> INVALID_JSON") {
        c.setTrusted(false)
        stream!!.awaitNotification("ide/contextUpdate", 5000) { (it["workspaceState"] as Map<*, *>)["isTrusted"] == false }
        c.setContextJson(Json.write(mapOf("workspaceState" to mapOf(
            "openFiles" to listOf(mapOf("path" to readme.path, "timestamp" to 1000, "isActive" to true,
                "cursor" to mapOf("line" to 1, "character" to 1), "selectedText" to "r")),
            "isTrusted" to true))))
        val p = stream!!.awaitNotification("ide/contextUpdate", 5000) { params ->
            val files = (params["workspaceState"] as Map<*, *>)["openFiles"] as List<*>
            files.size == 1 && (files[0] as Map<*, *>)["path"] == readme.path
        }
        checkEq(p.obj("workspaceState")["isTrusted"], true, "isTrusted")
        expectStatus(QcStatus.INVALID_JSON, "bad context") { c.setContextJson("{\"workspaceState\": 5") }
    }

    h.test("argument checks: NUL in path, cursor 0, no focused file") {
        expectStatus(QcStatus.INVALID_ARGUMENT, "NUL") { c.fileOpened("/tmp/a\u0000b") }
        expectStatus(QcStatus.INVALID_ARGUMENT, "cursor 0") { c.setCursor(readme.path, 0, 1) }
        c.setSelection(readme.path, "with\u0000nul") // text is length-delimited: allowed
        val fresh = QwenCompanion(QwenCompanionConfig(lockDir = dirs.lockDir.path), lib)
        try {
            expectStatus(QcStatus.NOT_FOUND, "cursor without focus") { fresh.setCursor(null, 1, 1) }
        } finally {
            fresh.close()
        }
    }

    h.test("selection over 16384 UTF-16 units is cut with the marker") {
        val big = "𝄞".repeat(10000) // 20000 UTF-16 units
        c.setSelection(readme.path, big)
        val ctx = Json.parseObject(c.contextJson())
        val sel = (ctx.obj("workspaceState").list("openFiles")[0] as Map<*, *>)["selectedText"] as String
        check(sel.endsWith("... [TRUNCATED]")) { "marker" }
        check(sel.length <= 16384) { "length ${sel.length}" }
        check(!Character.isHighSurrogate(sel[sel.length - "... [TRUNCATED]".length - 1])) { "split surrogate" }
    }

    h.test("keepAliveMs: out of range -> INVALID_ARGUMENT; 100 ms -> keep-alives on the GET stream") {
        expectStatus(QcStatus.INVALID_ARGUMENT, "keepAliveMs 60000") {
            QwenCompanion(QwenCompanionConfig(lockDir = dirs.lockDir.path, keepAliveMs = 60000), lib).close()
        }
        val k = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path, keepAliveMs = 100), lib)
        try {
            k.start()
            val tok = Json.parseObject(String(File(k.lockFilePath()).readBytes(), Charsets.UTF_8)).str("authToken")
            McpClient(k.port(), tok).use { cl ->
                cl.initialize()
                checkEq(cl.initialized(), 202, "initialized")
                val s = cl.openStream()
                eventually(3000, "two keep-alives (seen ${s.keepAlives.get()})") { s.keepAlives.get() >= 2 }
            }
        } finally {
            k.close()
        }
    }

    h.group("binding: stop, restart, close")

    h.test("stop removes the lock file and ends the SSE stream; second stop -> NOT_RUNNING") {
        val lockPath = File(c.lockFilePath())
        c.stop()
        check(!lockPath.exists()) { "lock file still there" }
        expectStatus(QcStatus.NOT_RUNNING, "port") { c.port() }
        expectStatus(QcStatus.NOT_RUNNING, "second stop") { c.stop() }
        check(stream!!.awaitEnd(5000)) { "SSE stream did not end" }
        client.close()
    }

    h.test("restart gets a new lock file; close removes it; close is idempotent") {
        c.start()
        val lockPath = File(c.lockFilePath())
        check(lockPath.isFile) { "lock after restart" }
        checkEq(c.terminalEnv()["QWEN_CODE_IDE_SERVER_PORT"], c.port().toString(), "env port")
        c.close()
        check(!lockPath.exists()) { "lock file after close" }
        check(c.isClosed) { "isClosed" }
        c.close()
        expectThrows<QwenCompanionException.Closed>("port after close") { c.port() }
        expectThrows<QwenCompanionException.Closed>("onOpenDiff after close") { c.onOpenDiff(null) }
        check(!c.isRunning) { "isRunning after close" }
    }

    h.test("close while calls run on other threads: never a crash, only Closed") {
        val d = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path), lib)
        d.start()
        val lockPath = File(d.lockFilePath())
        d.fileFocused(readme.path)
        val start = CountDownLatch(1)
        val ok = AtomicInteger()
        val closedSeen = AtomicInteger()
        val bad = Collections.synchronizedList(ArrayList<Throwable>())
        val inUse = CountDownLatch(4) // each thread made a call
        val threads = (0 until 4).map { i ->
            Thread {
                start.await()
                val until = System.currentTimeMillis() + 400
                var first = true
                while (System.currentTimeMillis() < until) {
                    try {
                        if (i % 2 == 0) d.contextJson() else d.setCursor(readme.path, 1 + (ok.get() % 5), 1)
                        ok.incrementAndGet()
                        if (first) { first = false; inUse.countDown() }
                    } catch (e: QwenCompanionException.Closed) {
                        closedSeen.incrementAndGet()
                    } catch (t: Throwable) {
                        bad.add(t)
                    }
                }
            }.also { it.start() }
        }
        start.countDown()
        check(inUse.await(5, TimeUnit.SECONDS)) { "the threads never called" }
        d.close()
        for (t in threads) t.join()
        check(bad.isEmpty()) { "unexpected: $bad" }
        check(ok.get() > 0 && closedSeen.get() > 0) { "ok=${ok.get()} closed=${closedSeen.get()}" }
        check(!lockPath.exists()) { "lock file after close" }
    }

    h.test("close() from inside the open-diff handler") {
        val d = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path), lib)
        d.start()
        val lockPath = File(d.lockFilePath())
        val tok = Json.parseObject(String(lockPath.readBytes(), Charsets.UTF_8)).str("authToken")
        val inHandler = CountDownLatch(1)
        d.onOpenDiff { _, _ ->
            d.close()
            inHandler.countDown()
            OpenDiffResult.Shown
        }
        val cl = McpClient(d.port(), tok)
        cl.initialize()
        cl.initialized()
        try {
            cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "x.txt").path, "newContent" to "x"))
        } catch (e: Throwable) {
            // the server goes away while answering (no response / connection
            // closed): either outcome is fine, the point is what follows
        }
        check(inHandler.await(5, TimeUnit.SECONDS)) { "handler did not run" }
        check(d.isClosed) { "closed" }
        eventually(5000, "lock file removal") { !lockPath.exists() }
        cl.close()
    }

    h.test("an unreferenced companion is freed by the Cleaner (lock file removed)") {
        var lockPath: File? = null
        fun make() {
            val d = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path), lib)
            d.start()
            lockPath = File(d.lockFilePath())
        }
        make()
        check(lockPath!!.isFile) { "lock file" }
        eventually(10000, "Cleaner to free the companion") {
            System.gc()
            !lockPath!!.exists()
        }
    }

    h.test("every pinned callback is released once its companions are freed") {
        eventually(5000, "pinned callbacks to drop to 0 (now ${QwenCompanion.pinnedCallbacks})") { QwenCompanion.pinnedCallbacks == 0 }
    }
}
