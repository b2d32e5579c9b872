"""perfscout.tools"""
