#!/usr/bin/env python3
"""Generate hwloc 2.x XML topology fixtures (format of `lstopo --of xml`, hwloc 2.9).

Fixtures:
  8gpu-8nic-switch.xml  2 sockets, 8x H100 + 8x CX-7, one GPU + one NIC per PCIe switch
  8gpu-4nic-pairs.xml   2 sockets, 8x H100 + 4x CX-7, two GPUs + one NIC per PCIe switch
  2socket-cross.xml     2 sockets, 8x MI300X, 4x Thor2 NICs only on socket 0
  nics-no-gpu.xml       1 socket, 2x CX-7, no GPU
  sim-8gpu-8nic.xml     8gpu-8nic-switch with the NICs named gda_mlx5_0..7 (the software NIC's
                        verbs devices), for jobs run on the software NIC

hwloc 2.x encodings used (as hwloc 2.9 writes and reads them):
  osdev_type: 0=BLOCK 1=GPU 2=NETWORK 3=OPENFABRICS 4=DMA 5=COPROC
  CUDA  -> osdev_type=5 (COPROC), subtype="CUDA", name cudaN
  RSMI  -> osdev_type=1 (GPU),    subtype="RSMI", name rsmiN
  bridge_type "U-D": 0=HOST 1=PCI ; host bridge "0-1" depth 0, PCI-PCI "1-1" depth>=1
  bridge_pci "DDDD:[SS-BB]" (domain, secondary bus, subordinate bus)
  pci_busid  "DDDD:BB:DD.F"
  pci_type   "CCCC [VVVV:DDDD] [SVSV:SDSD] RR" (class, vendor:device, subvendor:subdevice, revision)
"""
import os
from xml.sax.saxutils import quoteattr

# Written next to the tests that load them.
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "topo", "tests", "fixtures")

GEN5_X16 = "63.015385"   # GB/s, what hwloc computes for 32GT/s x16
GEN4_X16 = "31.507692"

# ---------------------------------------------------------------- devices
H100 = dict(cls=0x0302, ven=0x10de, dev=0x2330, sven=0x10de, sdev=0x16c1, rev=0xa1,
            vname="NVIDIA Corporation", dname="GH100 [H100 SXM5 80GB]", speed=GEN5_X16)
MI300X = dict(cls=0x1200, ven=0x1002, dev=0x74a1, sven=0x1002, sdev=0x74a1, rev=0x00,
              vname="Advanced Micro Devices, Inc. [AMD/ATI]",
              dname="Aqua Vanjaram [Instinct MI300X]", speed=GEN5_X16)
CX7 = dict(cls=0x0207, ven=0x15b3, dev=0x1021, sven=0x15b3, sdev=0x0041, rev=0x00,
           vname="Mellanox Technologies", dname="MT2910 Family [ConnectX-7]", speed=GEN5_X16)
THOR2 = dict(cls=0x0200, ven=0x14e4, dev=0x1760, sven=0x14e4, sdev=0x5200, rev=0x11,
             vname="Broadcom Inc. and subsidiaries",
             dname="BCM57608 10/25/50/100/200/400G Ethernet [Thor 2]", speed=GEN5_X16)
# PCIe switch ports (Broadcom/PLX PEX890xx) and CPU root ports
SW_UP = dict(cls=0x0604, ven=0x1000, dev=0xc030, sven=0x1000, sdev=0x100b, rev=0xb0,
             vname="Broadcom / LSI", dname="PEX890xx PCIe Gen 5 Switch", speed=GEN5_X16)
SW_DOWN = SW_UP
ROOT_INTEL = dict(cls=0x0604, ven=0x8086, dev=0x352a, sven=0x8086, sdev=0x0000, rev=0x04,
                  vname="Intel Corporation", dname="Sapphire Rapids PCIe Root Port", speed=GEN5_X16)
ROOT_AMD = dict(cls=0x0604, ven=0x1022, dev=0x14ab, sven=0x0000, sdev=0x0000, rev=0x00,
                vname="Advanced Micro Devices, Inc. [AMD]",
                dname="Genoa/Bergamo PCIe GPP Bridge", speed=GEN5_X16)


class Gen:
    def __init__(self):
        self.gp = 0
        self.lines = []

    def next_gp(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)


def attrs(d):
    return " ".join("%s=%s" % (k, quoteattr(str(v))) for k, v in d)


def pci_type(p):
    return "%04x [%04x:%04x] [%04x:%04x] %02x" % (p["cls"], p["ven"], p["dev"],
                                                  p["sven"], p["sdev"], p["rev"])


def busid(bus, dev=0, fn=0, dom=0):
    return "%04x:%02x:%02x.%01x" % (dom, bus, dev, fn)


# ---------------------------------------------------------------- I/O tree model
# node = ("hostbridge", sec, sub, [children])
#        ("bridge", busid(bus,dev,fn), spec, sec, sub, [children])
#        ("pcidev", bus, spec, [osdevs])      osdev = (name, osdev_type, subtype|None, [(k,v)...])


def write_osdev(g, depth, od):
    name, otype, subtype, infos = od
    a = [("type", "OSDev"), ("gp_index", g.next_gp()), ("name", name)]
    if subtype:
        a.append(("subtype", subtype))
    a.append(("osdev_type", otype))
    if infos:
        g.emit(depth, "<object %s>" % attrs(a))
        for k, v in infos:
            g.emit(depth + 1, "<info %s/>" % attrs([("name", k), ("value", v)]))
        g.emit(depth, "</object>")
    else:
        g.emit(depth, "<object %s/>" % attrs(a))


def write_io(g, depth, node, bdepth=0):
    kind = node[0]
    if kind == "hostbridge":
        _, sec, sub, children = node
        a = [("type", "Bridge"), ("gp_index", g.next_gp()), ("bridge_type", "0-1"),
             ("depth", 0), ("bridge_pci", "0000:[%02x-%02x]" % (sec, sub))]
        g.emit(depth, "<object %s>" % attrs(a))
        for c in children:
            write_io(g, depth + 1, c, 1)
        g.emit(depth, "</object>")
    elif kind == "bridge":
        _, bid, spec, sec, sub, children = node
        a = [("type", "Bridge"), ("gp_index", g.next_gp()), ("bridge_type", "1-1"),
             ("depth", bdepth), ("bridge_pci", "0000:[%02x-%02x]" % (sec, sub)),
             ("pci_busid", bid), ("pci_type", pci_type(spec)),
             ("pci_link_speed", spec["speed"])]
        g.emit(depth, "<object %s>" % attrs(a))
        g.emit(depth + 1, "<info %s/>" % attrs([("name", "PCIVendor"), ("value", spec["vname"])]))
        g.emit(depth + 1, "<info %s/>" % attrs([("name", "PCIDevice"), ("value", spec["dname"])]))
        for c in children:
            write_io(g, depth + 1, c, bdepth + 1)
        g.emit(depth, "</object>")
    elif kind == "pcidev":
        _, bid, spec, osdevs = node
        a = [("type", "PCIDev"), ("gp_index", g.next_gp()), ("pci_busid", bid),
             ("pci_type", pci_type(spec)), ("pci_link_speed", spec["speed"])]
        g.emit(depth, "<object %s>" % attrs(a))
        g.emit(depth + 1, "<info %s/>" % attrs([("name", "PCIVendor"), ("value", spec["vname"])]))
        g.emit(depth + 1, "<info %s/>" % attrs([("name", "PCIDevice"), ("value", spec["dname"])]))
        for od in osdevs:
            write_osdev(g, depth + 1, od)
        g.emit(depth, "</object>")
    else:
        raise ValueError(kind)


def check_ranges(node, lo=0, hi=0xff):
    """Sanity check: every bridge's bus window sits inside its parent's window, and
    every device's bus is a bus its parent bridge forwards (secondary..subordinate)."""
    kind = node[0]
    if kind == "hostbridge":
        _, sec, sub, ch = node
        assert lo <= sec <= sub <= hi
        for c in ch:
            check_ranges(c, sec, sub)
    elif kind == "bridge":
        _, bid, _, sec, sub, ch = node
        bus = int(bid.split(":")[1], 16)
        assert lo <= bus <= hi, (bid, lo, hi)
        assert bus < sec <= sub <= hi, (bid, sec, sub, hi)
        for c in ch:
            check_ranges(c, sec, sub)
    else:
        bus = int(node[1].split(":")[1], 16)
        assert lo == bus, (node[1], lo)  # endpoint sits on the bridge's secondary bus


# ---------------------------------------------------------------- OS devices
def guid(i, base):
    v = base + i
    s = "%016x" % v
    return ":".join(s[k:k + 4] for k in range(0, 16, 4))


def cuda_osdevs(i):
    return [("cuda%d" % i, 5, "CUDA", [
        ("Backend", "CUDA"),
        ("GPUVendor", "NVIDIA Corporation"),
        ("GPUModel", "NVIDIA H100 80GB HBM3"),
        ("CUDAGlobalMemorySize", "81079808"),
        ("CUDAL2CacheSize", "51200"),
        ("CUDAMultiProcessors", "132"),
        ("CUDACoresPerMP", "128"),
        ("CUDASharedMemorySizePerMP", "228"),
    ])]


def rsmi_osdevs(i, n):
    peers = " ".join("rsmi%d" % j for j in range(n) if j != i)
    return [("rsmi%d" % i, 1, "RSMI", [
        ("Backend", "RSMI"),
        ("GPUVendor", "AMD"),
        ("GPUModel", "AMD Instinct MI300X"),
        ("AMDUUID", "%016x" % (0x7d3f6a2b00000000 + i)),
        ("XGMIHiveID", "0x7a1cd2e300c1f00d"),
        ("RSMIVRAMSize", "201310208"),
        ("RSMIVisibleVRAMSize", "201310208"),
        ("RSMIGTTSize", "1056641588"),
        ("XGMIPeers", peers),
    ])]


def mlx_osdevs(i, bus, ib=True, prefix=""):
    g = guid(i, 0xa088c20300a1b200)
    infos = [("NodeGUID", g), ("SysImageGUID", g),
             ("Port1State", "4"), ("Port1LID", "0x%x" % (0x10 + i)), ("Port1LMC", "0"),
             ("Port1GID0", "fe80:0000:0000:0000:" + g)]
    net = ("ibp%ds0" % bus if ib else "enp%ds0np0" % bus, 2, None,
           [("Address", "00:00:10:49:fe:80:00:00:00:00:00:00:" +
             ":".join(g.replace(":", "")[k:k + 2] for k in range(0, 16, 2))) if ib
            else ("Address", "a0:88:c2:a1:b2:%02x" % i),
            ("Port", "1")])
    return [net, ("%smlx5_%d" % (prefix, i), 3, None, infos)]


def bnxt_osdevs(i, bus):
    mac = "84:16:0c:5e:a7:%02x" % (0x10 + i)
    g = "8616:0cff:fe5e:a7%02x" % (0x10 + i)
    return [("ens%df0np0" % bus, 2, None, [("Address", mac), ("Port", "1")]),
            ("bnxt_re%d" % i, 3, None, [
                ("NodeGUID", g), ("SysImageGUID", g),
                ("Port1State", "4"), ("Port1LID", "0x0"), ("Port1LMC", "0"),
                ("Port1GID0", "fe80:0000:0000:0000:" + g)])]


# ---------------------------------------------------------------- switch builders
def switch_1gpu_1nic(g_bus, gpu, nic, root):
    """hostbridge [G-3..G+1] -> root port (G-3):01.0 -> switch up (G-2):00.0
       -> down (G-1):00.0 -> GPU G:00.0 ; down (G-1):01.0 -> NIC (G+1):00.0
       gpu/nic = (spec, osdevs) or None."""
    G = g_bus
    downs = []
    if gpu:
        downs.append(("bridge", busid(G - 1, 0), SW_DOWN, G, G, [("pcidev", busid(G), gpu[0], gpu[1])]))
    if nic:
        downs.append(("bridge", busid(G - 1, 1), SW_DOWN, G + 1, G + 1,
                      [("pcidev", busid(G + 1), nic[0], nic[1])]))
    up = ("bridge", busid(G - 2), SW_UP, G - 1, G + 1, downs)
    rp = ("bridge", busid(G - 3, 1), root, G - 2, G + 1, [up])
    return ("hostbridge", G - 3, G + 1, [rp])


def switch_2gpu_1nic(g0, g1, gpu0, gpu1, nic):
    """hostbridge [g0-3..g1+1] -> root port -> switch up -> 3 downstream ports:
       GPU g0:00.0, NIC (g0+1):00.0, GPU g1:00.0"""
    assert g1 > g0 + 1
    downs = [
        ("bridge", busid(g0 - 1, 0), SW_DOWN, g0, g0, [("pcidev", busid(g0), gpu0[0], gpu0[1])]),
        ("bridge", busid(g0 - 1, 1), SW_DOWN, g0 + 1, g0 + 1, [("pcidev", busid(g0 + 1), nic[0], nic[1])]),
        ("bridge", busid(g0 - 1, 2), SW_DOWN, g1, g1, [("pcidev", busid(g1), gpu1[0], gpu1[1])]),
    ]
    up = ("bridge", busid(g0 - 2), SW_UP, g0 - 1, g1 + 1, downs)
    rp = ("bridge", busid(g0 - 3, 1), ROOT_INTEL, g0 - 2, g1 + 1, [up])
    return ("hostbridge", g0 - 3, g1 + 1, [rp])


def nic_direct(bus, nic, root=ROOT_INTEL):
    """hostbridge [bus-1..bus] -> root port (bus-1):01.0 -> NIC bus:00.0 (no switch)."""
    rp = ("bridge", busid(bus - 1, 1), root, bus, bus, [("pcidev", busid(bus), nic[0], nic[1])])
    return ("hostbridge", bus - 1, bus, [rp])


# ---------------------------------------------------------------- CPU side / document
def cpuset_str(pus):
    v = 0
    for p in pus:
        v |= 1 << p
    words = []
    while True:
        words.append(v & 0xffffffff)
        v >>= 32
        if not v:
            break
    # hwloc format: most significant word first, comma separated, 0x prefix on first
    return "0x" + ",0x".join("%08x" % w for w in reversed(words))


def build(filename, sockets, cores_per_socket, io_per_socket, cpu_vendor="GenuineIntel",
          cpu_model="Intel(R) Xeon(R) Platinum 8480C", mem_per_node=1 << 40,
          hostname="fixture-node"):
    g = Gen()
    npu = sockets * cores_per_socket
    all_cpus = cpuset_str(range(npu))
    all_nodes = cpuset_str(range(sockets))
    g.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    g.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    g.emit(0, '<topology version="2.0">')
    root = [("type", "Machine"), ("os_index", 0), ("cpuset", all_cpus), ("complete_cpuset", all_cpus),
            ("allowed_cpuset", all_cpus), ("nodeset", all_nodes), ("complete_nodeset", all_nodes),
            ("allowed_nodeset", all_nodes), ("gp_index", g.next_gp())]
    g.emit(1, "<object %s>" % attrs(root))
    for k, v in [("Backend", "Linux"), ("LinuxCgroup", "/"), ("OSName", "Linux"),
                 ("OSRelease", "5.15.0-1042-nvidia"), ("OSVersion", "#42-Ubuntu SMP"),
                 ("HostName", hostname), ("Architecture", "x86_64"),
                 ("hwlocVersion", "2.9.0"), ("ProcessName", "lstopo-no-graphics")]:
        g.emit(2, "<info %s/>" % attrs([("name", k), ("value", v)]))
    for s in range(sockets):
        pus = list(range(s * cores_per_socket, (s + 1) * cores_per_socket))
        cs = cpuset_str(pus)
        ns = cpuset_str([s])
        pkg = [("type", "Package"), ("os_index", s), ("cpuset", cs), ("complete_cpuset", cs),
               ("nodeset", ns), ("complete_nodeset", ns), ("gp_index", g.next_gp())]
        g.emit(2, "<object %s>" % attrs(pkg))
        for k, v in [("CPUVendor", cpu_vendor), ("CPUModel", cpu_model)]:
            g.emit(3, "<info %s/>" % attrs([("name", k), ("value", v)]))
        numa = [("type", "NUMANode"), ("os_index", s), ("cpuset", cs), ("complete_cpuset", cs),
                ("nodeset", ns), ("complete_nodeset", ns), ("gp_index", g.next_gp()),
                ("local_memory", mem_per_node)]
        g.emit(3, "<object %s>" % attrs(numa))
        g.emit(4, '<page_type size="4096" count="%d"/>' % (mem_per_node // 4096))
        g.emit(4, '<page_type size="2097152" count="0"/>')
        g.emit(4, '<page_type size="1073741824" count="0"/>')
        g.emit(3, "</object>")
        for c, p in enumerate(pus):
            pc = cpuset_str([p])
            core = [("type", "Core"), ("os_index", c), ("cpuset", pc), ("complete_cpuset", pc),
                    ("nodeset", ns), ("complete_nodeset", ns), ("gp_index", g.next_gp())]
            pu = [("type", "PU"), ("os_index", p), ("cpuset", pc), ("complete_cpuset", pc),
                  ("nodeset", ns), ("complete_nodeset", ns), ("gp_index", g.next_gp())]
            g.emit(3, "<object %s>" % attrs(core))
            g.emit(4, "<object %s/>" % attrs(pu))
            g.emit(3, "</object>")
        for hb in io_per_socket[s]:
            check_ranges(hb)
            write_io(g, 3, hb)
        g.emit(2, "</object>")
    g.emit(1, "</object>")
    g.emit(0, "</topology>")
    path = os.path.join(OUT, filename)
    with open(path, "w") as f:
        f.write("\n".join(g.lines) + "\n")
    print("wrote", path)


DGX_GPU_BUS = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb]


def fixture_8gpu_8nic(prefix="", filename="8gpu-8nic-switch.xml", hostname="dgx-h100-8nic"):
    io = [[], []]
    for i, b in enumerate(DGX_GPU_BUS):
        gpu = (H100, cuda_osdevs(i))
        nic = (CX7, mlx_osdevs(i, b + 1, prefix=prefix))
        io[i // 4].append(switch_1gpu_1nic(b, gpu, nic, ROOT_INTEL))
    build(filename, 2, 8, io, hostname=hostname)


def fixture_8gpu_4nic():
    io = [[], []]
    for k in range(4):
        g0, g1 = DGX_GPU_BUS[2 * k], DGX_GPU_BUS[2 * k + 1]
        io[k // 2].append(switch_2gpu_1nic(g0, g1, (H100, cuda_osdevs(2 * k)),
                                           (H100, cuda_osdevs(2 * k + 1)),
                                           (CX7, mlx_osdevs(k, g0 + 1))))
    build("8gpu-4nic-pairs.xml", 2, 8, io, hostname="h100-4nic-pairs")


MI300X_GPU_BUS = [0x0c, 0x22, 0x38, 0x5c, 0x9f, 0xaf, 0xbf, 0xdf]


def fixture_cross():
    io = [[], []]
    for i, b in enumerate(MI300X_GPU_BUS):
        gpu = (MI300X, rsmi_osdevs(i, 8))
        nic = (THOR2, bnxt_osdevs(i, b + 1)) if i < 4 else None
        io[i // 4].append(switch_1gpu_1nic(b, gpu, nic, ROOT_AMD))
    build("2socket-cross.xml", 2, 8, io, cpu_vendor="AuthenticAMD",
          cpu_model="AMD EPYC 9654 96-Core Processor", hostname="mi300x-cross")


def fixture_nics_no_gpu():
    io = [[nic_direct(0x17, (CX7, mlx_osdevs(0, 0x17))),
           nic_direct(0x31, (CX7, mlx_osdevs(1, 0x31)))]]
    build("nics-no-gpu.xml", 1, 8, io, hostname="cpu-only-2nic", mem_per_node=1 << 39)


if __name__ == "__main__":
    fixture_8gpu_8nic()
    fixture_8gpu_4nic()
    fixture_cross()
    fixture_nics_no_gpu()
    # The DGX node with its NICs named as the verbs-compatible library names its devices
    # (GDA_VERBS_DEVICES=mlx5:8 shows gda_mlx5_0..7), for jobs on the software NIC.
    fixture_8gpu_8nic(prefix="gda_", filename="sim-8gpu-8nic.xml", hostname="sim-dgx-8nic")
