// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nouveau.ko, the kernel's own driver for NVIDIA GPUs, for the kernel test tier
 * (docs/kernel-tier.md): only a module of that name, with no dependency and no device, so that tests can
 * load and unload it as driver-manager finds it on a node (loaded, and in the way of nvidia). The kernel's
 * real nouveau is in drivers/gpu/drm/nouveau.
 */
#include <linux/module.h>

static int __init nouveau_stub_init(void)
{
	return 0;
}

static void __exit nouveau_stub_exit(void)
{
}

module_init(nouveau_stub_init);
module_exit(nouveau_stub_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nouveau.ko for driver-manager's kernel test tier");
