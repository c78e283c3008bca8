// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia-uvm.ko (Unified Memory), for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled (https://github.com/NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia-uvm/uvm.c): it uses
 * nvidia's exports, so the kernel links it to nvidia (nvidia's holders/ lists nvidia_uvm and counts one
 * reference for it); a dynamic character major named "nvidia-uvm" with /dev/nvidia-uvm (minor 0) and
 * /dev/nvidia-uvm-tools (minor 1), whose file operations are owned by this module (an open file holds a
 * reference on nvidia_uvm, not on nvidia). Not modelled: any memory management; like nvidia's nodes, the
 * real ones are made by nvidia-modprobe, not through a class.
 */
#include <linux/cdev.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/module.h>

#include "nvstub.h"

#define UVM_MINORS 2

static dev_t uvm_base;
static struct cdev uvm_cdev;
static struct class *uvm_class;

static int uvm_open(struct inode *inode, struct file *file)
{
	return 0;
}

static const struct file_operations uvm_fops = {
	.owner = THIS_MODULE,
	.open = uvm_open,
	.llseek = noop_llseek,
};

static void uvm_remove(void)
{
	if (!IS_ERR_OR_NULL(uvm_class)) {
		device_destroy(uvm_class, MKDEV(MAJOR(uvm_base), 0));
		device_destroy(uvm_class, MKDEV(MAJOR(uvm_base), 1));
		class_destroy(uvm_class);
	}
	uvm_class = NULL;
	cdev_del(&uvm_cdev);
	unregister_chrdev_region(uvm_base, UVM_MINORS);
}

static int __init uvm_init(void)
{
	struct device *dev;
	int rc;

	pr_info("nvidia_uvm: %d GPUs\n", nvstub_gpu_count());
	rc = alloc_chrdev_region(&uvm_base, 0, UVM_MINORS, "nvidia-uvm");
	if (rc)
		return rc;
	cdev_init(&uvm_cdev, &uvm_fops);
	rc = cdev_add(&uvm_cdev, uvm_base, UVM_MINORS);
	if (rc) {
		unregister_chrdev_region(uvm_base, UVM_MINORS);
		return rc;
	}
	uvm_class = class_create(THIS_MODULE, "nvidia-uvm-stub");
	rc = PTR_ERR_OR_ZERO(uvm_class);
	if (!rc) {
		dev = device_create(uvm_class, NULL, MKDEV(MAJOR(uvm_base), 0), NULL, "nvidia-uvm");
		rc = PTR_ERR_OR_ZERO(dev);
	}
	if (!rc) {
		dev = device_create(uvm_class, NULL, MKDEV(MAJOR(uvm_base), 1), NULL, "nvidia-uvm-tools");
		rc = PTR_ERR_OR_ZERO(dev);
	}
	if (rc)
		uvm_remove();
	return rc;
}

static void __exit uvm_exit(void)
{
	uvm_remove();
}

module_init(uvm_init);
module_exit(uvm_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia-uvm.ko for driver-manager's kernel test tier");
