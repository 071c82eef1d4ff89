"""The checker: module loading, typing against the std families, lowering to the IR."""

from alphac.check.api import check_file, load_deployment, load_spec, module_files, select_deployment

__all__ = ["check_file", "load_deployment", "load_spec", "module_files", "select_deployment"]
