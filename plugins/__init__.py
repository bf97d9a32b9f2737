"""One subpackage per framework. Each imports its framework at module top and, when the
framework is missing, raises an ImportError naming the extra to install."""
