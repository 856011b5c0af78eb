package qwen.companion.tests

import qwen.companion.Json
import qwen.companion.LogLevel
import qwen.companion.OpenDiffResult
import qwen.companion.QcStatus
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import java.io.DataInputStream
import java.io.File
import java.lang.ref.WeakReference
import java.util.Collections

/** Issue 12's binding items: handler exceptions logged, requestTimeoutMs, JVM target, collectable handlers. */
fun bindingFixTests(h: Harness, dirs: TestDirs) {
    h.group("binding: handlers, timeouts, lifetime")
    val lib = QwenCompanionLibrary.load()
    val pinnedBefore = QwenCompanion.pinnedCallbacks

    fun client(c: QwenCompanion): McpClient {
        val token = Json.parseObject(File(c.lockFilePath()).readText()).str("authToken")
        val cl = McpClient(c.port(), token)
        cl.initialize()
        cl.initialized()
        return cl
    }

    h.test("the classes are built for the Java the binding needs (Cleaner: Java 9+)") {
        val stream = QwenCompanion::class.java.getResourceAsStream("NativeHandle.class")
            ?: throw CheckFailed("NativeHandle.class not on the class path")
        val major = DataInputStream(stream).use { s ->
            checkEq(s.readInt(), 0xCAFEBABE.toInt(), "magic")
            s.readUnsignedShort()
            s.readUnsignedShort()
        }
        check(major >= 53) { "class file version $major is below Java 9 (53): java.lang.ref.Cleaner would not resolve" }
    }

    h.test("a throwing openDiff / closeDiff handler is logged (ERROR) as well as answered to the CLI") {
        val logs = Collections.synchronizedList(ArrayList<String>())
        val c = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path), lib)
        try {
            c.setLogHandler({ level, m -> logs.add("$level $m") }, LogLevel.WARN)
            c.onOpenDiff { _, _ -> throw IllegalStateException("kaboom in open") }
            c.onCloseDiff { _ -> throw IllegalArgumentException("kaboom in close") }
            c.start()
            client(c).use { cl ->
                val r = cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "x.txt").path, "newContent" to "X"))
                checkEq(r["isError"], true, "isError")
                eventually(5000, "the open failure in the log ($logs)") {
                    synchronized(logs) { logs.any { it.startsWith("ERROR ") && it.contains("openDiff handler") && it.contains("kaboom in open") } }
                }
            }
        } finally {
            c.close()
        }
    }

    h.test("requestTimeoutMs: sent to the library, range-checked, and the CLI's openDiff gives up after it") {
        check(QwenCompanionConfig(requestTimeoutMs = 1500).toJson().contains("\"requestTimeoutMs\":1500")) { "json" }
        check(!QwenCompanionConfig().toJson().contains("requestTimeoutMs")) { "absent by default" }
        expectStatus(QcStatus.INVALID_ARGUMENT, "50 ms") {
            QwenCompanion(QwenCompanionConfig(lockDir = dirs.lockDir.path, requestTimeoutMs = 50), lib).close()
        }
        val c = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path, requestTimeoutMs = 1000), lib)
        try {
            c.onOpenDiff { _, _ -> Thread.sleep(4000); OpenDiffResult.Shown } // a deliberately slow host
            c.start()
            client(c).use { cl ->
                val t0 = System.nanoTime()
                val r = cl.callTool("openDiff", mapOf("filePath" to File(dirs.ws, "slow.txt").path, "newContent" to "X"))
                val ms = (System.nanoTime() - t0) / 1_000_000
                checkEq(r["isError"], true, "isError after the timeout")
                check(ms in 900..3500) { "answered after $ms ms (timeout 1000, handler 4000)" }
            }
        } finally {
            c.close()
        }
    }

    h.test("a companion whose handlers capture it is still collected, and freed, when dropped without close()") {
        var ref: WeakReference<QwenCompanion>? = null
        var lockPath: File? = null
        fun make() {
            val d = QwenCompanion(QwenCompanionConfig(workspaceRoots = listOf(dirs.ws.path), lockDir = dirs.lockDir.path), lib)
            // Each handler keeps `d` itself: the pinned adapters must not make it reachable for ever.
            d.setLogHandler({ _, _ -> d.toString() }, LogLevel.DEBUG)
            d.onOpenDiff { p, _ -> d.diffReject(p); OpenDiffResult.Shown }
            d.onCloseDiff { _ -> d.contextJson() }
            d.start()
            ref = WeakReference(d)
            lockPath = File(d.lockFilePath())
        }
        make()
        check(lockPath!!.isFile) { "lock file" }
        eventually(15000, "the companion to be collected and its lock file removed") {
            System.gc()
            ref!!.get() == null && !lockPath!!.exists()
        }
    }

    h.test("a plugin host whose handlers capture it is collected when dropped without close()") {
        var ref: WeakReference<QwenPluginHost>? = null
        fun make() {
            val host = QwenPluginHost(QwenPluginHostConfig(pluginsDir = File(dirs.root, "gc-plugins").path), lib)
            host.onEvent { _ -> host.toString() }
            host.setCapability("show_notification") { _ -> host.pluginsDir }
            host.setLogHandler({ _, _ -> host.toString() })
            ref = WeakReference(host)
        }
        make()
        eventually(15000, "the plugin host to be collected") {
            System.gc()
            ref!!.get() == null
        }
    }

    h.test("the collected objects' callbacks are released once the Cleaner freed them") {
        eventually(15000, "pinned callbacks back to $pinnedBefore (now ${QwenCompanion.pinnedCallbacks})") {
            System.gc()
            QwenCompanion.pinnedCallbacks == pinnedBefore
        }
    }
}
