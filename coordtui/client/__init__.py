"""coordtui client SDK: the only code in coordtui that knows URLs and wire shapes."""
