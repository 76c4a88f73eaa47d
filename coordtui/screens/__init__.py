"""Modal and full screens of coordtui: connect, forms, help, task detail."""
