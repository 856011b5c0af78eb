#!/usr/bin/env python3
"""Packs the Kotlin binding's distribution jar and the IntelliJ plugin zip
(called by build-dist.sh, which also imports it to check the native files
before compiling; tests/kotlin/test_dist.py checks the results independently).

  pack_dist.py jar NATIVE_DIR VERSION BINDING_CLASSES_JAR OUT_JAR
  pack_dist.py plugin VERSION SINCE_BUILD PLUGIN_CLASSES_DIR RESOURCES_DIR BINDING_JAR OUT_ZIP

The jar holds the binding's classes, every platform's library and
qc-mcp-bridge under JNA's resource prefixes, and qwen-companion-natives.properties
(version and each native file's SHA-256, which the binding checks its copies
against). Entries are sorted and dated 1980-01-01, so the same inputs give the
same bytes.
"""
import hashlib
import os
import re
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dist"))
import packing  # noqa: E402  (scripts/dist/packing.py: formats, reproducible zips)

# triple -> (JNA resource prefix, library file, bridge file, format, cpu)
TARGETS = {
    "x86_64-unknown-linux-gnu": ("linux-x86-64", "libqwen_companion.so", "qc-mcp-bridge", "elf", "x86_64"),
    "aarch64-unknown-linux-gnu": ("linux-aarch64", "libqwen_companion.so", "qc-mcp-bridge", "elf", "aarch64"),
    "x86_64-pc-windows-gnu": ("win32-x86-64", "qwen_companion.dll", "qc-mcp-bridge.exe", "pe", "x86_64"),
    "aarch64-apple-darwin": ("darwin-aarch64", "libqwen_companion.dylib", "qc-mcp-bridge", "macho", "aarch64"),
    "x86_64-apple-darwin": ("darwin-x86-64", "libqwen_companion.dylib", "qc-mcp-bridge", "macho", "x86_64"),
}
# Built by dist.sh from the two darwin triples; the jar uses the per-CPU files.
IGNORED = {"universal-apple-darwin"}
INDEX = "qwen-companion-natives.properties"
EPOCH = (1980, 1, 1, 0, 0, 0)


class PackError(Exception):
    pass


def check_image(data, fmt, cpu, role, what):
    """Raises PackError unless data is a fmt/cpu image of the role ('lib' or 'exe')."""
    got_fmt, got_cpu, kind = packing.image(data)
    if (got_fmt, got_cpu) != (fmt, cpu):
        raise PackError("%s is %s/%s, expected %s/%s" % (what, got_fmt, got_cpu, fmt, cpu))
    if kind not in (role, "lib-or-pie"):
        raise PackError("%s is a %s, expected a %s" % (what, "library" if kind == "lib" else "program" if kind == "exe" else "file of unknown kind",
                                                        "library" if role == "lib" else "program"))


def natives(native_dir):
    """[(triple, prefix, [(entry, bytes)])] for the triples in native_dir; PackError on bad input."""
    if not os.path.isdir(native_dir):
        raise PackError("%s is not a folder (run bash scripts/dist.sh first)" % native_dir)
    found = []
    for triple in sorted(os.listdir(native_dir)):
        path = os.path.join(native_dir, triple)
        if triple in IGNORED or not os.path.isdir(path):
            continue
        if triple not in TARGETS:
            raise PackError("%s: unknown target %s (known: %s)" % (native_dir, triple, ", ".join(sorted(TARGETS))))
        prefix, lib, bridge, fmt, cpu = TARGETS[triple]
        files = []
        for name, role in ((lib, "lib"), (bridge, "exe")):
            f = os.path.join(path, name)
            if not os.path.isfile(f):
                raise PackError("%s is missing (the %s target is incomplete)" % (f, triple))
            with open(f, "rb") as fh:
                data = fh.read()
            check_image(data, fmt, cpu, role, f)
            files.append(("%s/%s" % (prefix, name), data))
        found.append((triple, prefix, files))
    if not found:
        raise PackError("%s holds no target folder (expected some of: %s)" % (native_dir, ", ".join(sorted(TARGETS))))
    return found


def write_zip(out, entries):
    """entries: {name: (bytes, unix_mode)}; the manifest first, then sorted; fixed dates."""
    names = sorted(entries, key=lambda n: (n != "META-INF/", n != "META-INF/MANIFEST.MF", n))
    packing.write_zip(out, [(n, entries[n][0], entries[n][1]) for n in names], EPOCH)


def manifest(title, version, extra=""):
    return ("Manifest-Version: 1.0\r\nImplementation-Title: %s\r\nImplementation-Version: %s\r\n%s\r\n"
            % (title, version, extra)).encode()


def jar(native_dir, version, classes_jar, out):
    entries = {}
    with zipfile.ZipFile(classes_jar) as z:
        for n in z.namelist():
            if n == "META-INF/MANIFEST.MF" or n.endswith("/"):
                continue
            entries[module_file(n, "qwen-companion-kotlin")] = (z.read(n), 0o100644)
    if "qwen/companion/QcBundled.class" not in entries:
        raise PackError("%s does not hold the binding's classes (qwen/companion/QcBundled.class)" % classes_jar)
    index = ["# qwen-companion native files: <JNA resource prefix>/<file>=<SHA-256>", "version=%s" % version]
    for _triple, _prefix, files in natives(native_dir):
        for entry, data in files:
            entries[entry] = (data, 0o100755)
            index.append("%s=%s" % (entry, hashlib.sha256(data).hexdigest()))
    entries[INDEX] = (("\n".join(index) + "\n").encode(), 0o100644)
    entries["META-INF/MANIFEST.MF"] = (manifest("qwen-companion-kotlin", version, "Main-Class: qwen.companion.QcBundled\r\n"), 0o100644)
    write_zip(out, entries)


def plugin(version, since_build, classes_dir, resources_dir, binding_jar, out):
    entries = {}
    root = os.path.join(classes_dir, "qwen", "companion", "intellij")
    if not os.path.isdir(root):
        raise PackError("%s holds no plugin classes (qwen/companion/intellij)" % classes_dir)
    for d, _dirs, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, classes_dir).replace(os.sep, "/")
            with open(p, "rb") as fh:
                entries[rel] = (fh.read(), 0o100644)
    mdir = os.path.join(classes_dir, "META-INF")
    for f in sorted(os.listdir(mdir)) if os.path.isdir(mdir) else []:
        if f.endswith(".kotlin_module"):
            with open(os.path.join(mdir, f), "rb") as fh:
                entries[module_file("META-INF/" + f, "qwen-companion-intellij")] = (fh.read(), 0o100644)
    meta = os.path.join(resources_dir, "META-INF")
    for f in sorted(os.listdir(meta)):
        with open(os.path.join(meta, f), "rb") as fh:
            data = fh.read()
        if f == "plugin.xml":
            data = patch_plugin_xml(data.decode("utf-8"), version, since_build).encode("utf-8")
        entries["META-INF/" + f] = (data, 0o100644)
    # Other resources (the toolbar icon): as they are, under their path.
    for d, _dirs, fs in os.walk(resources_dir):
        for f in fs:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, resources_dir).replace(os.sep, "/")
            if rel.startswith("META-INF/"):
                continue
            with open(p, "rb") as fh:
                entries[rel] = (fh.read(), 0o100644)
    entries["META-INF/MANIFEST.MF"] = (manifest("qwen-companion-intellij", version), 0o100644)
    tmp_jar = out + ".plugin.jar"
    write_zip(tmp_jar, entries)
    with open(tmp_jar, "rb") as fh:
        plugin_jar = fh.read()
    os.remove(tmp_jar)
    with open(binding_jar, "rb") as fh:
        binding = fh.read()
    top = "qwen-companion-intellij/"
    write_zip(out, {
        top: (b"", 0o40755), top + "lib/": (b"", 0o40755),
        top + "lib/qwen-companion-intellij-%s.jar" % version: (plugin_jar, 0o100644),
        top + "lib/" + os.path.basename(binding_jar): (binding, 0o100644),
    })


def module_file(name, module):
    """META-INF/<x>.kotlin_module under a name of its own: the binding and the plugin share
    one class loader in the IDE, where two "main" modules would hide each other."""
    if name.startswith("META-INF/") and name.endswith(".kotlin_module"):
        return "META-INF/%s.kotlin_module" % module
    return name


def patch_plugin_xml(xml, version, since_build):
    """Adds <version> and <idea-version since-build> (what the Gradle plugin's patchPluginXml does)."""
    if "<version>" in xml or "<idea-version" in xml:
        raise PackError("plugin.xml already has <version> or <idea-version>: they come from the build")
    m = re.search(r"(\n(\s*)<name>[^<]*</name>)", xml)
    if not m:
        raise PackError("plugin.xml has no <name> element")
    ind = m.group(2)
    add = '\n%s<version>%s</version>\n%s<idea-version since-build="%s"/>' % (ind, version, ind, since_build)
    return xml[:m.end()] + add + xml[m.end():]


def main(argv):
    try:
        if len(argv) == 6 and argv[1] == "jar":
            jar(*argv[2:])
        elif len(argv) == 8 and argv[1] == "plugin":
            plugin(*argv[2:])
        else:
            sys.stderr.write(__doc__)
            return 2
    except PackError as e:
        sys.stderr.write("build-dist: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
