package qwen.companion.tests

import java.io.File
import java.nio.file.Files
import kotlin.system.exitProcess

/**
 * Kotlin test program for the binding and the IntelliJ plugin's
 * IDE-independent core, against the real library.
 *
 * Run by bindings/kotlin/run-tests.sh. System properties:
 *   qc.test.lib      path of libqwen_companion.so (for the explicit-path test)
 *   qc.test.timeout  watchdog in seconds (default 240)
 */
fun main(args: Array<String>) {
    val h = Harness()
    val timeout = (System.getProperty("qc.test.timeout") ?: "240").toLong()
    val watchdog = Thread {
        try {
            Thread.sleep(timeout * 1000)
            println("kotlin: ${h.passed} passed, ${h.failed + 1} failed (watchdog: timed out after ${timeout}s)")
            Runtime.getRuntime().halt(3)
        } catch (e: InterruptedException) {
        }
    }
    watchdog.isDaemon = true
    watchdog.start()

    val root = Files.createTempDirectory("qc-kotlin-").toFile()
    val dirs = TestDirs(root)
    val only = args.toSet()
    try {
        if (only.isEmpty() || only.contains("binding")) bindingTests(h, dirs, System.getProperty("qc.test.lib"))
        if (only.isEmpty() || only.contains("binding")) bindingFixTests(h, TestDirs(File(root, "binding-fixes")))
        if (only.isEmpty() || only.contains("binding")) platformTests(h, File(root, "platform").also { it.mkdirs() })
        if (only.isEmpty() || only.contains("binding")) geminiBindingTests(h, File(root, "gemini").also { it.mkdirs() })
        if (only.isEmpty() || only.contains("sessions")) sessionTests(h, File(root, "sessions"))
        if (only.isEmpty() || only.contains("plugins")) pluginTests(h, File(root, "plugins").also { it.mkdirs() })
        if (only.isEmpty() || only.contains("json")) jsonTests(h)
        if (only.isEmpty() || only.contains("intellij")) intellijCoreTests(h, TestDirs(File(root, "ij")))
        if (only.isEmpty() || only.contains("intellij")) intellijFixTests(h, TestDirs(File(root, "ij-fixes")))
        if (only.isEmpty() || only.contains("intellij")) intellijPluginHostTests(h, File(root, "ij-host").also { it.mkdirs() }, System.getProperty("qc.test.lib"))
        if (only.isEmpty() || only.contains("intellij") || only.contains("intellij-ui")) intellijUiTests(h, File(root, "ij-ui").also { it.mkdirs() })
        if (only.isEmpty() || only.contains("intellij") || only.contains("intellij-sessions")) intellijSessionTests(h, File(root, "ij-s").also { it.mkdirs() })
        if (only.isEmpty() || only.contains("intellij") || only.contains("intellij-editor")) intellijEditorTests(h, File(root, "ij-e").also { it.mkdirs() }, System.getProperty("qc.test.lib"))
        if (only.isEmpty() || only.contains("intellij") || only.contains("intellij-gemini")) intellijGeminiTests(h, File(root, "ij-g").also { it.mkdirs() }, System.getProperty("qc.test.lib"))
    } catch (t: Throwable) {
        h.test("suite did not abort") { throw t }
    } finally {
        root.deleteRecursively()
    }
    for (f in h.failures) println("failed: $f")
    println("kotlin: ${h.passed} passed, ${h.failed} failed")
    System.out.flush()
    exitProcess(if (h.failed == 0 && h.passed > 0) 0 else 1)
}
