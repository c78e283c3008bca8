// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of gdrdrv.ko, for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled: GDRCopy's driver (https://github.com/NVIDIA/gdrcopy, src/gdrdrv). It calls nvidia's peer-to-peer entry points (nvidia_p2p_get_pages and
 * nvidia_p2p_put_pages, declared in https://github.com/NVIDIA/open-gpu-kernel-modules,
 * kernel-open/nvidia/nv-p2p.h), so the kernel links it to nvidia: nvidia's holders/ lists it and counts one
 * reference for it. Not modelled: any memory registration.
 */
#include <linux/module.h>

#include "nvstub.h"

static int __init p2p_user_init(void)
{
	pr_info("gdrdrv: nvidia_p2p_get_pages answers %d\n",
		nvidia_p2p_get_pages(0, 0, 0, 0, NULL, NULL, NULL));
	return 0;
}
module_init(p2p_user_init);
static void __exit p2p_user_exit(void)
{
	nvidia_p2p_put_pages(0, 0, 0, NULL);
}
module_exit(p2p_user_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of gdrdrv.ko for driver-manager's kernel test tier");
