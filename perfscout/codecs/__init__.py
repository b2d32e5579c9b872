"""perfscout.codecs"""
