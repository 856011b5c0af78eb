package qwen.companion.tests

import qwen.companion.QcBundled
import qwen.companion.QcPlatform
import qwen.companion.QcPlatform.Os
import qwen.companion.QcPlatform.Shell
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import com.sun.jna.Pointer
import java.io.File

/** QcPlatform: file names, shell lines and the pull-mode wait of every OS, by OS name (run on Linux). */
fun platformTests(h: Harness, root: File) {
    h.group("binding: QcPlatform")

    h.test("QcBundled.PREFIXES are the resource folders JNA computes for Linux, macOS and Windows on x86-64 and aarch64") {
        // Platform.getNativeLibraryResourcePrefix(osType, os.arch, os.name) is package-private in JNA 5.13.
        val m = com.sun.jna.Platform::class.java.getDeclaredMethod("getNativeLibraryResourcePrefix", Int::class.javaPrimitiveType, String::class.java, String::class.java)
        m.isAccessible = true
        val jna = listOf(
            Triple(com.sun.jna.Platform.LINUX, "amd64", "Linux"), Triple(com.sun.jna.Platform.LINUX, "aarch64", "Linux"),
            Triple(com.sun.jna.Platform.MAC, "aarch64", "Mac OS X"), Triple(com.sun.jna.Platform.MAC, "x86_64", "Mac OS X"),
            Triple(com.sun.jna.Platform.WINDOWS, "amd64", "Windows 11")
        ).map { (os, arch, name) -> m.invoke(null, os, arch, name) as String }
        checkEq(QcBundled.PREFIXES, jna, "prefixes")
        checkEq(QcBundled.prefix, com.sun.jna.Platform.RESOURCE_PREFIX, "this JVM")
    }

    h.test("file names per OS") {
        checkEq(Os.values().map { QcPlatform.libraryFileName(it) }, listOf("libqwen_companion.so", "libqwen_companion.dylib", "qwen_companion.dll"), "library")
        checkEq(Os.values().map { QcPlatform.bridgeFileName(it) }, listOf("qc-mcp-bridge", "qc-mcp-bridge", "qc-mcp-bridge.exe"), "bridge")
        val osName = System.getProperty("os.name")
        val expected = when {
            osName.startsWith("Windows") -> Os.WINDOWS
            osName.startsWith("Mac") -> Os.MACOS
            else -> Os.LINUX
        }
        checkEq(QcPlatform.current(), expected, "this JVM ($osName)")
    }

    h.test("shell choice: setting, the terminal's shell path, then the OS") {
        checkEq(QcPlatform.shellFor("auto", Os.WINDOWS, null), Shell.POWERSHELL, "Windows")
        checkEq(QcPlatform.shellFor(null, Os.LINUX, "/bin/zsh"), Shell.POSIX, "zsh")
        checkEq(QcPlatform.shellFor("", Os.MACOS, "/opt/homebrew/bin/fish"), Shell.FISH, "fish")
        checkEq(QcPlatform.shellFor("auto", Os.WINDOWS, "C:\\Program Files\\PowerShell\\7\\pwsh.exe -NoLogo"), Shell.POWERSHELL, "pwsh with args")
        checkEq(QcPlatform.shellFor("auto", Os.WINDOWS, "\"C:\\Program Files\\Git\\bin\\bash.exe\" --login"), Shell.POSIX, "Git Bash")
        checkEq(QcPlatform.shellFor("auto", Os.WINDOWS, "cmd.exe"), Shell.CMD, "cmd")
        checkEq(QcPlatform.shellFor("CMD", Os.LINUX, "/bin/bash"), Shell.CMD, "explicit")
        val e = expectThrows<IllegalArgumentException>("unknown") { QcPlatform.shellFor("tcsh", Os.LINUX, null) }
        check(e.message!!.contains("unknown terminal shell 'tcsh'")) { "message ${e.message}" }
    }

    h.test("lines of each shell, hostile values") {
        val env = mapOf("QWEN_CODE_IDE_WORKSPACE_PATH" to "C:\\a b;D:\\c", "QWEN_CODE_IDE_SERVER_PORT" to "4711")
        checkEq(QcPlatform.envLines(env, Shell.POSIX), listOf("export QWEN_CODE_IDE_SERVER_PORT='4711'", "export QWEN_CODE_IDE_WORKSPACE_PATH='C:\\a b;D:\\c'"), "posix")
        checkEq(QcPlatform.envLines(env, Shell.FISH), listOf("set -gx QWEN_CODE_IDE_SERVER_PORT '4711'", "set -gx QWEN_CODE_IDE_WORKSPACE_PATH 'C:\\\\a b;D:\\\\c'"), "fish")
        checkEq(QcPlatform.envLines(env, Shell.POWERSHELL), listOf("\$env:QWEN_CODE_IDE_SERVER_PORT = '4711'", "\$env:QWEN_CODE_IDE_WORKSPACE_PATH = 'C:\\a b;D:\\c'"), "powershell")
        checkEq(QcPlatform.envLines(env, Shell.CMD), listOf("set \"QWEN_CODE_IDE_SERVER_PORT=4711\"", "set \"QWEN_CODE_IDE_WORKSPACE_PATH=C:\\a b;D:\\c\""), "cmd")
        checkEq(QcPlatform.envLine("K", "it's \u2018x\u2019 \$a `b", Shell.POWERSHELL), "\$env:K = 'it''s \u2018\u2018x\u2019\u2019 \$a `b'", "every PowerShell quote doubled")
        checkEq(QcPlatform.envLine("K", "a ^& b | <c>; d' \$e", Shell.CMD), "set \"K=a ^& b | <c>; d' \$e\"", "cmd literals")
        for ((bad, what) in listOf("a\nb" to "line break", "a\rb" to "line break", "a\"b" to "double quote", "50%" to "percent")) {
            val e = expectThrows<IllegalArgumentException>("cmd: $what") { QcPlatform.envLine("K", bad, Shell.CMD) }
            check(e.message!!.contains("cmd cannot set K") && e.message!!.contains(what) && e.message!!.contains("PowerShell")) { "message ${e.message}" }
        }
        for (name in listOf("", "1A", "A B", "A=B", "\$A")) {
            expectThrows<IllegalArgumentException>("name '$name'") { QcPlatform.envLine(name, "v", Shell.POSIX) }
        }
        expectThrows<IllegalArgumentException>("NUL") { QcPlatform.envLine("K", "a\u0000b", Shell.POSIX) }
        // what sh makes of a posix line is the value itself
        val hostile = "it's a \"test\" ; \$HOME `id` %PATH% ^& | <x> \\ ! *\nline two"
        val p = ProcessBuilder("sh", "-c", QcPlatform.envLine("QC_V", hostile, Shell.POSIX) + "\nprintf %s \"\$QC_V\"").start()
        val out = p.inputStream.readBytes().toString(Charsets.UTF_8)
        p.waitFor()
        checkEq(out, hostile, "through sh")
    }

    h.test("pull-mode wait: poll elsewhere, WaitForSingleObject on Windows with a sign-extended HANDLE") {
        checkEq(Os.values().map { QcPlatform.eventWaitMethod(it) },
            listOf(QcPlatform.WaitMethod.POLL, QcPlatform.WaitMethod.POLL, QcPlatform.WaitMethod.WAIT_FOR_SINGLE_OBJECT), "method")
        checkEq(Pointer.nativeValue(QcPlatform.handleFromInt32(0x1A4)), 0x1A4L, "positive")
        checkEq(Pointer.nativeValue(QcPlatform.handleFromInt32(-1)), -1L, "-1 is 0xFFFF_FFFF_FFFF_FFFF")
        checkEq(Pointer.nativeValue(QcPlatform.handleFromInt32(Int.MIN_VALUE)), -0x80000000L, "sign-extended")
    }

    h.test("QwenPluginHost.waitEvent: refused before enableEvents, then polls the descriptor") {
        val dir = File(root, "wait-plugins").also { it.mkdirs() }
        val host = QwenPluginHost(QwenPluginHostConfig(pluginsDir = dir.path))
        try {
            val e = expectThrows<QwenCompanionException.Call>("before pull mode") { host.waitEvent(0) }
            check(e.message!!.contains("enableEvents")) { "message ${e.message}" }
            host.enableEvents()
            checkEq(host.waitEvent(50), false, "nothing waits")
            checkEq(host.nextEvent(), null, "no event")
        } finally {
            host.close()
        }
    }
}
