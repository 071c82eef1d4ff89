"""The role image: everything one role executable needs from the plan, as plain data (op
tables, owner layout, wire constants, samples, initial words), encoded as the words the C
runtime reads, with the generated C header that names them."""

from alphac.image.image import CpuNeeds, ImageError, OwnerImage, RoleImage, build_image

__all__ = ["CpuNeeds", "ImageError", "OwnerImage", "RoleImage", "build_image"]
