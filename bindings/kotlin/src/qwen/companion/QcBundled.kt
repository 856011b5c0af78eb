package qwen.companion

import com.sun.jna.Platform
import java.io.File
import java.io.IOException
import java.io.InputStream
import java.nio.channels.FileChannel
import java.nio.file.FileSystemException
import java.nio.file.Files
import java.nio.file.LinkOption
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import java.nio.file.StandardOpenOption
import java.nio.file.attribute.PosixFilePermission
import java.nio.file.attribute.PosixFilePermissions
import java.security.MessageDigest
import java.util.Properties

/**
 * The native files a distribution jar carries (`bindings/kotlin/build-dist.sh`):
 * the library and `qc-mcp-bridge` of every platform under JNA's resource
 * prefixes (`linux-x86-64/`, `linux-aarch64/`, `darwin-aarch64/`,
 * `darwin-x86-64/`, `win32-x86-64/`), and the index [INDEX] giving the
 * release and each file's SHA-256.
 *
 * Both files are copied out of the jar into a folder of the user's only
 * (`<qwen home>/companion/…`, `$QWEN_HOME` else `~/.qwen`): the library to
 * `companion/lib/<digest>/` (one folder per content, so IDEs running different
 * releases never overwrite a library another one has loaded), the bridge to
 * `companion/bin/` (Qwen Code starts it, possibly after the IDE has exited,
 * so it cannot live in a temporary folder; `settings.json` names that path).
 * Folders are 0700 and files 0700 on Linux and macOS; a file is written to a
 * temporary name and renamed into place, reused only when its SHA-256 matches
 * the index (a tampered or half-written file is replaced), and a symbolic link
 * is never followed (a link in the file's place is replaced; a link as the
 * folder is refused).
 *
 * A jar built without natives (the development build of `run-tests.sh`) has no
 * [INDEX]: [hasLibrary] and [hasBridge] are false and the library is found as
 * before (`QWEN_COMPANION_LIB`, `jna.library.path`, system paths).
 *
 * `java -cp qwen-companion-kotlin-<version>.jar:jna.jar:kotlin-stdlib.jar qwen.companion.QcBundled`
 * loads the library, installs the bridge and prints both paths ([main]).
 */
object QcBundled {
    /** The index resource at the jar's root: `version=…` and `<prefix>/<file>=<sha256 hex>` lines. */
    const val INDEX = "qwen-companion-natives.properties"

    /** The prefixes a distribution jar may carry, as JNA names them ([Platform.RESOURCE_PREFIX]). */
    @JvmField
    val PREFIXES: List<String> = listOf("linux-x86-64", "linux-aarch64", "darwin-aarch64", "darwin-x86-64", "win32-x86-64")

    /** This JVM's resource prefix ([Platform.RESOURCE_PREFIX], e.g. `linux-x86-64`). */
    @JvmStatic
    val prefix: String get() = Platform.RESOURCE_PREFIX

    private val index: Properties? by lazy {
        QcBundled::class.java.classLoader?.getResourceAsStream(INDEX)?.use { s -> Properties().also { it.load(s) } }
    }

    /** The release the jar's natives were built as (`version=` of [INDEX]), or null without natives. */
    @JvmStatic
    val version: String? get() = index?.getProperty("version")

    /** The prefixes whose library this jar carries (empty without natives). */
    @JvmStatic
    val prefixes: List<String> get() = PREFIXES.filter { p -> index?.getProperty("$p/${QcPlatform.libraryFileName(osOf(p))}") != null }

    /** True when the jar carries the library for this JVM's platform. */
    @JvmStatic
    fun hasLibrary(): Boolean = digestOf(QcPlatform.libraryFileName()) != null

    /** True when the jar carries `qc-mcp-bridge` for this JVM's platform. */
    @JvmStatic
    fun hasBridge(): Boolean = digestOf(QcPlatform.bridgeFileName()) != null

    /** `<qwen home>/companion`: `$QWEN_HOME` when set and not empty, else `~/.qwen` (the library's rule). */
    @JvmStatic
    fun companionDir(): File {
        val h = System.getenv("QWEN_HOME")
        val home = if (h != null && h.isNotEmpty()) File(h) else File(System.getProperty("user.home"), ".qwen")
        return File(home, "companion")
    }

    /** Where [installBridge] puts the bridge by default: `<qwen home>/companion/bin`. */
    @JvmStatic
    fun defaultBridgeDir(): File = File(companionDir(), "bin")

    /**
     * Copies this platform's library out of the jar (once per content) into
     * `<qwen home>/companion/lib/<first 16 hex of its SHA-256>/` and returns
     * the file, ready for `Native.load`. Folders of other releases unused for
     * [UNUSED_LIBRARY_DAYS] days are removed.
     *
     * @throws IOException when the jar has no library for this platform
     *   (the message lists the ones it has) or the copy fails.
     */
    @JvmStatic
    fun extractLibrary(): File {
        val name = QcPlatform.libraryFileName()
        val digest = digestOf(name) ?: throw missing("library $name")
        val root = File(companionDir(), "lib")
        val dir = File(root, digest.substring(0, 16))
        val lib = installFile(File(dir, name), digest, { open(name) })
        dir.setLastModified(System.currentTimeMillis()) // in use: never "unused" for pruneLibraries
        pruneLibraries(root, dir.name)
        return lib
    }

    /** How long a `companion/lib/<digest>` folder no JVM has used is kept: 30 days. */
    const val UNUSED_LIBRARY_DAYS = 30L

    /**
     * Removes the `<digest>` folders of [root] other than [keep] that no JVM has used for
     * [UNUSED_LIBRARY_DAYS] (releases replaced since), best effort: a file still loaded on
     * Windows stays until a later run. Links and other names are left alone.
     */
    private fun pruneLibraries(root: File, keep: String) {
        val cutoff = System.currentTimeMillis() - UNUSED_LIBRARY_DAYS * 24 * 3600 * 1000
        for (d in root.listFiles() ?: return) {
            val p = d.toPath()
            if (d.name == keep || !DIGEST16.matches(d.name) || !Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) continue
            if (d.lastModified() >= cutoff) continue
            d.listFiles()?.forEach { f -> if (Files.isRegularFile(f.toPath(), LinkOption.NOFOLLOW_LINKS)) f.delete() }
            d.delete()
        }
    }

    private val DIGEST16 = Regex("[0-9a-f]{16}")

    /**
     * Copies this platform's `qc-mcp-bridge` out of the jar into [dir]
     * (default [defaultBridgeDir]) unless an identical file is already there,
     * and returns its path (the one to register in `settings.json`).
     *
     * @throws IOException when the jar has no bridge for this platform or the copy fails.
     */
    @JvmStatic
    @JvmOverloads
    fun installBridge(dir: File = defaultBridgeDir()): File {
        val name = QcPlatform.bridgeFileName()
        val digest = digestOf(name) ?: throw missing("bridge $name")
        return installFile(File(dir, name), digest, { open(name) })
    }

    private fun osOf(prefix: String): QcPlatform.Os = when {
        prefix.startsWith("win32") -> QcPlatform.Os.WINDOWS
        prefix.startsWith("darwin") -> QcPlatform.Os.MACOS
        else -> QcPlatform.Os.LINUX
    }

    private fun digestOf(fileName: String): String? =
        index?.getProperty("$prefix/$fileName")?.trim()?.toLowerCase()?.takeIf { HEX64.matches(it) }

    private val HEX64 = Regex("[0-9a-f]{64}")

    private fun open(fileName: String): InputStream =
        QcBundled::class.java.classLoader?.getResourceAsStream("$prefix/$fileName")
            ?: throw IOException("the qwen-companion jar lists $prefix/$fileName in $INDEX but does not contain it (a damaged jar: reinstall it)")

    private fun missing(what: String): IOException {
        val has = prefixes
        return IOException(
            if (index == null) "this qwen-companion jar carries no native files (a development build); set ${QwenCompanionLibrary.ENV_VAR} to the library file"
            else "this qwen-companion jar has no $what for $prefix (it carries ${if (has.isEmpty()) "none" else has.joinToString(", ")}); " +
                "set ${QwenCompanionLibrary.ENV_VAR} to a library built for this platform"
        )
    }

    // ---- verified, atomic, user-only copies ------------------------------------------------

    /**
     * Makes [dest] a regular file whose SHA-256 is [sha256] (lowercase hex),
     * written from [source] when the file there is missing, differs, is not
     * user-only, or is a symbolic link. The folder is created user-only (0700
     * on POSIX file systems; refused when it is a symbolic link or owned by
     * another user), the file is written as a 0700 temporary file, checked and
     * renamed over [dest]. On Windows an executable in use cannot be replaced
     * but can be renamed ([windows]): the old file is moved aside
     * (`<name>.old-<pid>`) and removed once no process holds it. [move] is for tests.
     *
     * @throws IOException on any failure, or when [source] does not give [sha256].
     */
    @JvmStatic
    @JvmOverloads
    fun installFile(
        dest: File,
        sha256: String,
        source: () -> InputStream,
        windows: Boolean = QcPlatform.current() == QcPlatform.Os.WINDOWS,
        move: (Path, Path) -> Unit = { a, b -> Files.move(a, b, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE) }
    ): File {
        val want = sha256.toLowerCase()
        require(HEX64.matches(want)) { "not a SHA-256 digest: '$sha256'" }
        val dir = dest.absoluteFile.parentFile ?: throw IOException("$dest has no parent folder")
        privateDir(dir)
        val target = File(dir, dest.name).toPath()
        if (isIntact(target, want)) return target.toFile()
        removeOld(target)
        val tmp = if (posix(dir.toPath())) Files.createTempFile(dir.toPath(), ".${dest.name}.", ".tmp", PosixFilePermissions.asFileAttribute(USER_ONLY))
        else Files.createTempFile(dir.toPath(), ".${dest.name}.", ".tmp")
        try {
            val md = MessageDigest.getInstance("SHA-256")
            FileChannel.open(tmp, StandardOpenOption.WRITE).use { out ->
                source().use { s ->
                    val buf = ByteArray(64 * 1024)
                    while (true) {
                        val n = s.read(buf)
                        if (n < 0) break
                        md.update(buf, 0, n)
                        val bb = java.nio.ByteBuffer.wrap(buf, 0, n)
                        while (bb.hasRemaining()) out.write(bb)
                    }
                }
                out.force(true)
            }
            val got = hex(md.digest())
            if (got != want) throw IOException("the copy of ${dest.name} has SHA-256 $got, expected $want (a damaged jar or file: reinstall it)")
            if (posix(tmp)) {
                val owner = Files.getOwner(tmp, LinkOption.NOFOLLOW_LINKS)
                val dirOwner = Files.getOwner(dir.toPath(), LinkOption.NOFOLLOW_LINKS)
                if (owner != dirOwner) throw IOException("refusing to install into $dir: it belongs to $dirOwner, not to $owner")
            } else if (!tmp.toFile().setExecutable(true, true)) {
                throw IOException("cannot make $tmp executable")
            }
            try {
                move(tmp, target)
            } catch (e: FileSystemException) {
                if (!windows || !Files.exists(target, LinkOption.NOFOLLOW_LINKS)) throw e
                move(target, File(dir, "${dest.name}.old-${ProcessHandle.current().pid()}").toPath())
                move(tmp, target)
                removeOld(target)
            }
        } finally {
            Files.deleteIfExists(tmp)
        }
        return target.toFile()
    }

    private val USER_ONLY: Set<PosixFilePermission> =
        setOf(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE)

    private fun posix(p: Path): Boolean = Files.getFileStore(p).supportsFileAttributeView("posix")

    /** Creates [dir] (0700 on POSIX), or tightens it to 0700; refuses a symbolic link or a folder of another user. */
    private fun privateDir(dir: File) {
        val p = dir.toPath()
        if (Files.isSymbolicLink(p)) throw IOException("refusing to use $dir: it is a symbolic link")
        if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            dir.parentFile?.let { parent -> if (!parent.isDirectory && !parent.mkdirs() && !parent.isDirectory) throw IOException("cannot create $parent") }
            try {
                if (posix(dir.parentFile.toPath())) Files.createDirectory(p, PosixFilePermissions.asFileAttribute(USER_ONLY)) else Files.createDirectory(p)
            } catch (e: java.nio.file.FileAlreadyExistsException) {
                if (Files.isSymbolicLink(p)) throw IOException("refusing to use $dir: it is a symbolic link")
            }
        }
        if (!Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) throw IOException("cannot use $dir: it exists and is not a folder")
        if (posix(p) && Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS) != USER_ONLY) {
            try {
                Files.setPosixFilePermissions(p, USER_ONLY)
            } catch (e: IOException) {
                throw IOException("cannot make $dir private (mode 0700): ${e.message}", e)
            }
        }
    }

    /** A regular file (not a link) with [sha256], and user-only on POSIX. */
    private fun isIntact(f: Path, sha256: String): Boolean {
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) return false
        if (posix(f)) {
            if (Files.getPosixFilePermissions(f, LinkOption.NOFOLLOW_LINKS) != USER_ONLY) return false
        } else if (!f.toFile().canExecute()) return false
        return try {
            hex(Files.newInputStream(f, LinkOption.NOFOLLOW_LINKS).use { sha256(it) }) == sha256
        } catch (e: IOException) {
            false
        }
    }

    /** Deletes the `<file>.old-*` copies no running process holds (Windows keeps the others). */
    private fun removeOld(f: Path) {
        f.parent?.toFile()?.listFiles()?.filter { it.name.startsWith(f.fileName.toString() + ".old-") }?.forEach { it.delete() }
    }

    /** SHA-256 of a stream's bytes. */
    @JvmStatic
    fun sha256(s: InputStream): ByteArray {
        val md = MessageDigest.getInstance("SHA-256")
        val buf = ByteArray(64 * 1024)
        while (true) {
            val n = s.read(buf)
            if (n < 0) break
            md.update(buf, 0, n)
        }
        return md.digest()
    }

    /** Lowercase hex. */
    @JvmStatic
    fun hex(b: ByteArray): String = b.joinToString("") { String.format("%02x", it.toInt() and 0xff) }

    /**
     * `java -cp <jar>:jna.jar:kotlin-stdlib.jar qwen.companion.QcBundled [BRIDGE_DIR]`:
     * loads the library as [QwenCompanionLibrary.load] does, installs the bridge
     * (into BRIDGE_DIR, default [defaultBridgeDir]) and prints
     * `library <path>`, `version <version>` and `bridge <path>`, one per line.
     * Exit status 1 with a message on stderr when either fails.
     */
    @JvmStatic
    fun main(args: Array<String>) {
        if (args.size > 1 || args.any { it.startsWith("-") }) {
            System.err.println("usage: java -cp <qwen-companion jar>:<jna.jar>:<kotlin-stdlib.jar> qwen.companion.QcBundled [BRIDGE_DIR]")
            System.exit(2)
        }
        try {
            val lib = QwenCompanionLibrary.load()
            println("library ${lib.location}")
            println("version ${lib.version}")
            val bridge = if (args.isEmpty()) installBridge() else installBridge(File(args[0]))
            println("bridge ${bridge.path}")
        } catch (e: QwenCompanionException) {
            System.err.println("qwen-companion: ${e.message}")
            System.exit(1)
        } catch (e: IOException) {
            System.err.println("qwen-companion: ${e.message}")
            System.exit(1)
        }
    }
}
