#!/usr/bin/env bash
# Mesa's software Vulkan driver (lavapipe), so that CI runs Taichi's SPIR-V backend (the
# code path of Vulkan and Metal GPUs) without a GPU. Exits non-zero, saying why, where it
# cannot be installed; the Vulkan tests then skip.
#
# Debian 12's own Mesa (22.3) runs any atomic inside an inner loop of a shader wrong (the
# broad phase finds no pairs), so on Debian 12 Mesa comes from bookworm-backports (25.0).
set -uo pipefail
sudo=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
        echo "software Vulkan: not root and no sudo: not installed"; exit 1; fi
fi
if ! command -v apt-get >/dev/null; then
    echo "software Vulkan: no apt-get on this machine: not installed"; exit 1
fi
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
target=()
if [ "$codename" = bookworm ]; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" |
        $sudo tee /etc/apt/sources.list.d/fx2d-bookworm-backports.list >/dev/null
    target=(-t bookworm-backports)
fi
if ! $sudo apt-get update -qq >/dev/null 2>&1 ||
   ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${target[@]}" \
        mesa-vulkan-drivers libvulkan1 >/dev/null 2>&1; then
    echo "software Vulkan: apt-get could not install mesa-vulkan-drivers"; exit 1
fi
echo "software Vulkan: $(dpkg-query -W -f '${Package} ${Version}' mesa-vulkan-drivers)"
# An X server without a display, for the viewer's smoke test of a real window
# (tests/test_viewer_gui.py, skipped without xvfb-run).
if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq xvfb xauth >/dev/null 2>&1; then
    echo "software Vulkan: xvfb-run installed"
else
    echo "software Vulkan: xvfb could not be installed (the viewer's window test skips)"
fi
# The driver keeps a memory mapping for every kernel launch (fx2d_gpu.device.runtime's
# check_mapping_headroom): at Linux's default vm.max_map_count (65,530) a process crashes
# after ~20,000-60,000 launches (~120 steps of a 79-body pyramid). Room for longer runs:
limit=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
if [ "$limit" -lt 16777216 ]; then
    if $sudo sysctl -q -w vm.max_map_count=16777216 >/dev/null 2>&1; then
        echo "software Vulkan: vm.max_map_count $limit -> 16777216"
    else
        echo "software Vulkan: vm.max_map_count stays $limit (sysctl refused): long runs stop with a RuntimeError"
    fi
fi
