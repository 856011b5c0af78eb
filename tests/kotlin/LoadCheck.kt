package qwen.companion.tests

import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary

/**
 * Child-JVM entry point for the library-lookup tests: loads the library with
 * the default lookup and prints `OK <abi> <location>` or `LOAD <message>`.
 */
object LoadCheck {
    @JvmStatic
    fun main(args: Array<String>) {
        try {
            val lib = QwenCompanionLibrary.load()
            println("OK ${lib.abiVersion} ${lib.location}")
        } catch (e: QwenCompanionException.Load) {
            println("LOAD ${e.message}")
        }
    }
}

/** Runs [LoadCheck] in a child JVM with [env] changes and no jna.library.path; returns its output. */
fun runLoadCheck(env: Map<String, String?>): String {
    val java = ProcessHandle.current().info().command().orElse("java")
    val pb = ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), "qwen.companion.tests.LoadCheck")
    for ((k, v) in env) if (v == null) pb.environment().remove(k) else pb.environment()[k] = v
    pb.redirectErrorStream(true)
    val p = pb.start()
    val out = String(p.inputStream.readBytes(), Charsets.UTF_8).trim()
    p.waitFor()
    return out
}
