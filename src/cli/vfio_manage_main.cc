// vfio-manage: bind/unbind NVIDIA devices to/from vfio-pci, same commands and flags as upstream's tool
// (docs/behaviour.md, vfio-manage).
#include "vfio/command.h"

int main(int argc, char** argv) {
  return dm::vfio::vfio_manage_main(argc, argv);
}
