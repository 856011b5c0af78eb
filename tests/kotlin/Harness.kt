package qwen.companion.tests

import qwen.companion.Json
import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException

/** A minimal test runner: named checks, a summary line, no dependencies. */
class Harness {
    var passed = 0
        private set
    var failed = 0
        private set
    val failures = ArrayList<String>()
    private var group = ""

    fun group(name: String) {
        group = name
        println("# $name")
    }

    fun test(name: String, body: () -> Unit) {
        val t0 = System.nanoTime()
        try {
            body()
            passed++
            println("ok   - $name (${(System.nanoTime() - t0) / 1000000} ms)")
        } catch (t: Throwable) {
            failed++
            failures.add("$group: $name: $t")
            println("FAIL - $name: $t")
            t.printStackTrace(System.out)
        }
    }
}

class CheckFailed(message: String) : AssertionError(message)

fun check(cond: Boolean, message: () -> String) {
    if (!cond) throw CheckFailed(message())
}

fun <T> checkEq(actual: T, expected: T, what: String) {
    if (actual != expected) {
        throw CheckFailed("$what: expected ${show(expected)}, got ${show(actual)}")
    }
}

private fun show(v: Any?): String = when (v) {
    is String -> Json.write(v)
    is Map<*, *>, is List<*> -> Json.write(v)
    else -> v.toString()
}

/** Runs [block], expecting a [QwenCompanionException.Call] with [status]. */
fun expectStatus(status: QcStatus, what: String, block: () -> Unit): QwenCompanionException.Call {
    try {
        block()
    } catch (e: QwenCompanionException.Call) {
        checkEq(e.status, status, "$what: status (message: ${e.message})")
        return e
    }
    throw CheckFailed("$what: expected ${status.cName}, but the call succeeded")
}

inline fun <reified E : Throwable> expectThrows(what: String, block: () -> Unit): E {
    try {
        block()
    } catch (e: Throwable) {
        if (e is E) return e
        throw CheckFailed("$what: expected ${E::class.java.simpleName}, got $e")
    }
    throw CheckFailed("$what: expected ${E::class.java.simpleName}, nothing was thrown")
}

/** Polls [cond] until true or [timeoutMs] passes. */
fun eventually(timeoutMs: Long, what: String, cond: () -> Boolean) {
    val deadline = System.currentTimeMillis() + timeoutMs
    while (!cond()) {
        if (System.currentTimeMillis() > deadline) throw CheckFailed("timed out after $timeoutMs ms waiting for $what")
        Thread.sleep(20)
    }
}
