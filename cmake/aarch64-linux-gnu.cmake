# Cross-build for arm64 (linux/arm64: Grace Hopper, Grace Blackwell) on an x86-64 Debian machine, with Debian's
# aarch64-linux-gnu cross compiler and the arm64 libraries of dpkg multiarch (/usr/lib/aarch64-linux-gnu; see
# scripts/install-deps). The `release-arm64` and `arm64` presets use it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Libraries, headers and CMake packages: the multiarch tree of the system, plus the arm64 packages that cannot be
# installed beside their amd64 twins and are unpacked instead (libyaml-cpp-dev). Only arm64 directories of them
# are searched (lib/aarch64-linux-gnu, include), never the host's x86-64 libraries; programs (ccache,
# clang-format, bash) are the host's.
if(DEFINED ENV{DM_ARM64_ROOT})
  set(DM_ARM64_ROOT "$ENV{DM_ARM64_ROOT}")
else()
  set(DM_ARM64_ROOT /var/cache/driver-manager-arm64/root)
endif()
set(CMAKE_FIND_ROOT_PATH / ${DM_ARM64_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (FindOpenSSL and others ask it first) reads the arm64 .pc files only, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# The unpacked headers are system headers like those in /usr/include: no project warnings (-Werror) for them
# (GCC ignores a -I for a directory also given with -isystem).
set(CMAKE_CXX_FLAGS_INIT "-isystem ${DM_ARM64_ROOT}/usr/include")

# Tests run their arm64 executables under qemu's user-mode emulator. The arm64 loader and libc are those of
# dpkg multiarch (libc6:arm64: /lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu), the ones the image
# ships; qemu's -L with the cross toolchain's sysroot is not used: threads hang under it (qemu 7.2).
find_program(DM_QEMU_AARCH64 qemu-aarch64-static)
if(DM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${DM_QEMU_AARCH64})
endif()
