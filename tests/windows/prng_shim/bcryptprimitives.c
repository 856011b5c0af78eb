/* bcryptprimitives.dll with one export, ProcessPrng, for Wine versions that lack it.
 *
 * Rust's standard library (1.78 and later) on Windows fills its random buffers with
 * ProcessPrng from bcryptprimitives.dll. Windows 10+ ships it; Wine 8.0 does not, so a
 * Rust program fails to start there ("bcryptprimitives.dll not found"). This DLL is
 * installed into the test WINEPREFIX only (never shipped): ProcessPrng is implemented over
 * RtlGenRandom, which advapi32 exports as SystemFunction036.
 *
 * Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll \
 *            bcryptprimitives.c bcryptprimitives.def -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* Always TRUE, as documented for Windows: a failure to get randomness is fatal. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            ExitProcess(0xC0000001u); /* STATUS_UNSUCCESSFUL */
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
    (void)inst; (void)reason; (void)reserved;
    return TRUE;
}
