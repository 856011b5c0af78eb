/* Does this Windows (or Wine) provide ProcessPrng in bcryptprimitives.dll?
 * Exit 0: yes, and it filled a buffer; 2: the DLL does not load; 3: no ProcessPrng export;
 * 4: ProcessPrng returned FALSE. Prints the loaded DLL's path on success. */
#include <windows.h>
#include <stdio.h>

typedef BOOL(WINAPI *process_prng_fn)(PBYTE, SIZE_T);

int main(void)
{
    BYTE buf[32] = {0};
    char path[MAX_PATH] = "";
    HMODULE dll = LoadLibraryA("bcryptprimitives.dll");
    if (!dll) { printf("LoadLibrary(bcryptprimitives.dll) failed: error %lu\n", GetLastError()); return 2; }
    GetModuleFileNameA(dll, path, sizeof path);
    process_prng_fn prng = (process_prng_fn)(void (*)(void))GetProcAddress(dll, "ProcessPrng");
    if (!prng) { printf("%s has no ProcessPrng export\n", path); return 3; }
    if (!prng(buf, sizeof buf)) { printf("%s: ProcessPrng returned FALSE\n", path); return 4; }
    printf("%s\n", path);
    return 0;
}
