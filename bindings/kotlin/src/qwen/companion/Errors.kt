package qwen.companion

/**
 * The library's `qc_status` table (include/qwen_companion.h). The values are
 * fixed and never reused; a code this binding does not know maps to [UNKNOWN]
 * (the raw value stays available in [QwenCompanionException.Call.code]).
 */
enum class QcStatus(val code: Int) {
    OK(0),
    NULL_PARAMETER(1),
    INVALID_UTF8(2),
    INVALID_JSON(3),
    INVALID_ARGUMENT(4),
    INVALID_HANDLE(5),
    NOT_RUNNING(6),
    ALREADY_RUNNING(7),
    NOT_FOUND(8),
    IO(9),
    PANIC(10),
    INTERNAL(11),
    REFUSED(12),
    UNKNOWN(-1);

    /** The C constant's name, e.g. `QC_NOT_FOUND`. */
    val cName: String get() = "QC_$name"

    companion object {
        /** The status for a raw `qc_status` value ([UNKNOWN] when not in the table). */
        @JvmStatic
        fun fromCode(code: Int): QcStatus {
            for (s in values()) if (s.code == code && s != UNKNOWN) return s
            return UNKNOWN
        }
    }
}

/**
 * Every error this binding throws. Sealed so a `when` over it is exhaustive:
 * - [Call]: a library function returned a status other than `QC_OK` (or the
 *   binding refused an argument before calling, with the status the library
 *   would have used); open for the plugin host's [PluginCallException] and
 *   [PluginInstallException], which add the library's error document;
 * - [Load]: the native library could not be found or loaded, or its ABI
 *   version is not the one this binding was written for;
 * - [Closed]: the object was used after `close()`.
 */
sealed class QwenCompanionException(message: String, cause: Throwable? = null) :
    RuntimeException(message, cause) {

    /** The status as an enum, or `null` for [Load] and [Closed]. */
    abstract val status: QcStatus?

    /**
     * A library call failed. [function] is the C function (e.g.
     * `qc_companion_start`), [code] the raw status, [detail] the library's
     * message (from `char **error`).
     */
    open class Call(
        val function: String,
        val code: Int,
        val detail: String
    ) : QwenCompanionException("$function failed: ${QcStatus.fromCode(code).let { if (it == QcStatus.UNKNOWN) "status $code" else it.cName }}: $detail") {
        override val status: QcStatus get() = QcStatus.fromCode(code)
    }

    /** The native library could not be loaded, or has the wrong ABI version. */
    class Load(message: String, cause: Throwable? = null) : QwenCompanionException(message, cause) {
        override val status: QcStatus? get() = null
    }

    /** The object was used after `close()` (or after its Cleaner ran). */
    class Closed(what: String) : QwenCompanionException("$what is closed") {
        override val status: QcStatus? get() = null
    }
}
