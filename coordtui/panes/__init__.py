"""The live views of coordtui, one per tab."""
